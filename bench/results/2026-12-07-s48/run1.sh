#!/usr/bin/env bash
# Forty-eighth session, first call (asked as nvidia-h200): issue 16's sweep beside cuDNN and
# FA2 (fp16, bf16; d64, d128, d256 at 1k, 4k, 16k; b·n = 16k tokens), then the mixed serving
# batch beside its split calls (bench_varlen_paged.py, not run since it learned them).
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run1; mkdir -p $r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.limit --format=csv \
  | tee $r/gpu.txt
cd test/gpu
for dt in fp16 bf16; do
  timeout 250 python3 bench_head_dims.py --dims 64 128 256 --lengths 1024 4096 16384 \
    --dtype $dt --json $r/dims_$dt.json 2>&1 | tail -22 | tee $r/dims_$dt.log
done
timeout 70 python3 bench_varlen_paged.py --keys 4096 16384 --json $r/varlen_paged.json 2>&1 \
  | tail -14 | tee $r/varlen_paged.log
