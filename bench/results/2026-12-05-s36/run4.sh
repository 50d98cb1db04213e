#!/usr/bin/env bash
# Thirty-sixth session, for a later call: the seven masks beside FlexAttention, the host's cold
# compile, then rescale_under_s against the default on an H200 (the round s35 owed: its bound
# was measured here, its H100 A/B was inconsistent).
set -u
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/run4; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
(cd test/gpu && timeout 200 python3 bench_block_mask.py --json $r/masks.json 2>&1 | tail -14 | tee $r/masks.log)
timeout 90 python3 scripts/bench_cold_compile.py --runs 2 --dims 64,128,256 --build $b 2>&1 \
  | tee $r/cold.log | tail -30
cd test/gpu
timeout 280 python3 ab_gpu_options.py $r/ab --set rescale_under_s=True \
  --cases d256 dense --rounds 2 2>&1 | tee $r/ab.log | tail -30
# The varlen backward (packed-sequence training) beside nested SDPA (FA2's varlen) and padded
# cuDNN/FA2, d128 fp16, 64 sequences of 1..8192 tokens.
timeout 120 python3 bench_varlen.py --backward --json $r/varlen_backward.json 2>&1 | tail -8 \
  | tee $r/varlen_backward.log
