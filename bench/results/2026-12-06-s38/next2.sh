#!/usr/bin/env bash
# For the next session, on an H200 if one comes: issue 16's sweep beside cuDNN and FA2 (fp16,
# bf16), with d128's old short-causal block (64x64) timed beside the new default at 1k causal
# (CAUSAL_LONG_KEYS = 1024 since s38, chosen on one H100 process); first, that default's
# results at 1000-2047 keys against float32 (check_short_causal.py).
set -u
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/next2; mkdir -p $r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.limit --format=csv | tee $r/gpu.txt
timeout 60 python3 bench/results/2026-12-06-s38/check_short_causal.py 2>&1 | tail -12 | tee $r/short_causal.log
cd test/gpu
timeout 90 python3 bench_head_dims.py --dims 128 --lengths 1024 --sweep 64x64 \
  --json $r/short.json 2>&1 | tail -4 | tee $r/short.log
for dt in fp16 bf16; do
  timeout 240 python3 bench_head_dims.py --dims 64 128 256 --lengths 1024 4096 16384 --dtype $dt \
    --json $r/dims_$dt.json 2>&1 | tail -22 | tee $r/dims_$dt.log
done
