#!/usr/bin/env bash
# Forty-eighth session, last device call: on an H200, issue 16's sweep at fp16 (run1.sh's first
# half); on any other card, the serving GPU suite on this session's defaults instead.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run5; mkdir -p $r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.limit --format=csv \
  | tee $r/gpu.txt
cd test/gpu
if grep -q H200 $r/gpu.txt; then
  timeout 280 python3 bench_head_dims.py --dims 64 128 256 --lengths 1024 4096 16384 \
    --dtype fp16 --json $r/dims_fp16.json 2>&1 | tail -22 | tee $r/dims_fp16.log
else
  # The paged varlen kernel at 128-row blocks with short key blocks (0 spill over pages of 16).
  timeout 90 python3 bench_varlen_paged.py --keys 4096 16384 --cases mixed prefill \
    --blocks 128x32 128x16 --json $r/paged_blocks.json 2>&1 | tail -12 | tee $r/paged_blocks.log
  timeout 200 python3 -m pytest -q test_serving_gpu.py -x > $r/serving.log 2>&1
  tail -3 $r/serving.log
fi
