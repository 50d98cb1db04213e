#!/usr/bin/env bash
# Forty-eighth session (any one GPU): the mixed serving batch with its decode steps by the
# split-KV program (varlen_cache.PACK_DECODE_ROWS_CUDA): the GPU cases (mixed_packed beside the
# one-launch mixed and the decode-only batches), then its speed (bench_varlen_paged.py: the one
# launch, the packed two launches, the split calls).
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run2; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
timeout 150 python3 -m pytest -q test_serving_gpu.py -k "varlen_paged" > $r/cases.log 2>&1
tail -3 $r/cases.log
timeout 100 python3 bench_varlen_paged.py --keys 4096 16384 --json $r/varlen_paged.json 2>&1 \
  | tail -14 | tee $r/varlen_paged.log
