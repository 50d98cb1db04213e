#!/usr/bin/env bash
# Forty-eighth session: run2.sh and run3.sh in one call (any one GPU), with shorter limits.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run23; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
timeout 110 python3 -m pytest -q test_serving_gpu.py -k "varlen_paged" > $r/paged_cases.log 2>&1
tail -3 $r/paged_cases.log
timeout 80 python3 bench_varlen_paged.py --keys 4096 16384 --json $r/varlen_paged.json 2>&1 \
  | tail -9 | tee $r/varlen_paged.log
timeout 100 python3 -m pytest -q test_serving_gpu.py -k "test_varlen[ and (wide or tall)" \
  > $r/wide_cases.log 2>&1
tail -3 $r/wide_cases.log
for d in 128 64; do
  timeout 80 python3 bench_varlen.py --d $d --blocks 128x128 128x64 --json $r/varlen_d$d.json \
    2>&1 | tail -8 | tee $r/varlen_d$d.log
done
