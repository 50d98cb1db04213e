#!/usr/bin/env bash
# Forty-eighth session (any one GPU): attention_varlen's kernel at 128-row blocks (two
# consumer warpgroups and a producer, 128x128 TMA-fed as the dense kernels'; 0 spill here) —
# its GPU cases (test_varlen "wide" / "tall"), then its speed against the 64x64 default
# (bench_varlen.py --blocks), d128 and d64, fp16, 64 sequences of 1..8k.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run3; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
timeout 120 python3 -m pytest -q test_serving_gpu.py -k "test_varlen[ and (wide or tall)" \
  > $r/cases.log 2>&1
tail -3 $r/cases.log
for d in 128 64; do
  timeout 90 python3 bench_varlen.py --d $d --blocks 128x128 128x64 --json $r/varlen_d$d.json \
    2>&1 | tail -12 | tee $r/varlen_d$d.log
done
timeout 90 python3 bench_varlen.py --d 128 --h 32 --hkv 8 --blocks 128x128 \
  --json $r/varlen_gqa.json 2>&1 | tail -8 | tee $r/varlen_gqa.log
