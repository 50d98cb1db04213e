#!/usr/bin/env bash
# Forty-eighth session (any one GPU): the d256 cache kernels over small pages at 64x32
# (serving_checks.SMALL_PAGE_256_BLOCK_N: 0 spill where 64x64 spills 184-212 bytes) — GPU
# cases, then 64x64 against 64x32 (bench_cache_blocks.py).
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run4; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
timeout 90 python3 -m pytest -q test_serving_gpu.py -k "kvcache_256_small_pages" \
  > $r/cases.log 2>&1
tail -3 $r/cases.log
timeout 100 python3 bench_cache_blocks.py --json $r/blocks.json 2>&1 | tail -10 \
  | tee $r/blocks.log
