#!/usr/bin/env bash
# The session's last device time: on an H200 issue 16's sweep alone (fp16 then bf16, two rounds
# a row); on an H100 run2.sh (the C++ of this session: chunked attention, torch 2.11 suites).
set -u
cd "$(dirname "$0")/../../.."
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash bench/results/2026-12-07-s53/run2.sh
fi
source scripts/bundle-env.sh
r=$OUT/run3; mkdir -p $r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.limit --format=csv \
  | tee $r/gpu.txt
export TESSEL_CACHE_DIR=$(mktemp -d)
cd test/gpu
for dt in fp16 bf16; do
  timeout 170 python3 bench_head_dims.py --dims 64 128 256 --lengths 4096 16384 --rounds 2 \
    --dtype $dt --json $r/dims_$dt.json 2>&1 | tail -14 | tee $r/dims_$dt.log
done
