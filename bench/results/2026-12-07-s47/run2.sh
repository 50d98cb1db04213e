#!/usr/bin/env bash
# Forty-seventh session, asked as nvidia-h200 (s46's run1.sh, which no H200 came for): issue
# 16's sweep beside cuDNN and FA2 (fp16, bf16; d64, d128, d256 at 1k, 4k, 16k; b·n = 16k
# tokens) on this build.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run2; mkdir -p $r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.limit --format=csv \
  | tee $r/gpu.txt
cd test/gpu
for dt in fp16 bf16; do
  timeout 270 python3 bench_head_dims.py --dims 64 128 256 --lengths 1024 4096 16384 \
    --dtype $dt --json $r/dims_$dt.json 2>&1 | tail -22 | tee $r/dims_$dt.log
done
