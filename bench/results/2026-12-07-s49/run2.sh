#!/usr/bin/env bash
# Forty-ninth session, any one GPU: the varlen kernels' compact grid (serving_checks.
# VARLEN_TILES_CUDA, off until this passes) — its GPU cases, then its speed against the full
# grid (bench_varlen_paged.py --tiles: the mixed batch, chunked prefill, prefill chunks;
# bench_varlen.py --tiles: 64 sequences of 1-8k); the few-queries route's gather (spec rows).
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run2; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
timeout 200 python3 -m pytest -q test_serving_gpu.py -k "compact_grid or (varlen_paged and \
  (tiles or spec))" > $r/cases.log 2>&1
tail -3 $r/cases.log
timeout 150 python3 bench_varlen_paged.py --keys 4096 16384 --cases mixed chunk prefill spec \
  --tiles --json $r/paged.json 2>&1 | tail -14 | tee $r/paged.log
for d in 128 64; do
  timeout 100 python3 bench_varlen.py --d $d --tiles --json $r/varlen_d$d.json 2>&1 | tail -6 \
    | tee $r/varlen_d$d.log
done
