#!/usr/bin/env bash
# Issue 16's sweep with causal query blocks aligned to the last row where they visit fewer key
# blocks (attention.causal_block_cost): fp16 then bf16, two rounds a row, beside cuDNN and FA2.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run2; mkdir -p $r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.limit --format=csv \
  | tee $r/gpu.txt
export TESSEL_CACHE_DIR=$(mktemp -d)
cd test/gpu
for dt in fp16 bf16; do
  timeout 250 python3 bench_head_dims.py --dims 64 128 256 --lengths 4096 16384 --rounds 2 \
    --dtype $dt --json $r/dims_$dt.json 2>&1 | tail -14 | tee $r/dims_$dt.log
done
