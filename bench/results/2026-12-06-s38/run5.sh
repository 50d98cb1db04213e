#!/usr/bin/env bash
# Thirty-eighth session, last call: d256 at 128x80 (FlashAttention-3's d256 non-causal shape)
# beside the default 128x64 — correctness against float32, then the sweep's d256 rows with
# --sweep 128x80 (beside cuDNN and FA2, one process).
set -u
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/run5; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
timeout 60 python3 bench/results/2026-12-06-s38/bn80.py 2>&1 | tail -8 | tee $r/bn80.log
cd test/gpu
timeout 100 python3 bench_head_dims.py --dims 256 --lengths 4096 16384 --sweep 128x80 \
  --json $r/sweep.json 2>&1 | tail -6 | tee $r/sweep.log
