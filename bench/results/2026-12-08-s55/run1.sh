#!/usr/bin/env bash
# The fifty-fifth session's first call. On an H200: issue 16's sweep (s54's run2.sh). Then the
# checks owed by s54: examples/python/flash_drop_in.py on CUDA (chunked prefill and decode) and
# the differential fuzzer's flash and flash_varlen kinds on CUDA tensors; then d64 causal below
# 2k keys at 192x128 with ALIGN_END beside the default 64x128 (s54's next1.sh).
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run1; mkdir -p $r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.limit --format=csv \
  | tee $r/gpu.txt
export TESSEL_CACHE_DIR=$(mktemp -d)
if grep -q H200 $r/gpu.txt; then
  OUT=$r bash bench/results/2026-12-07-s54/run2.sh
fi
timeout 120 python3 -m pytest -q -p no:logging test/gpu/test_flash_gpu.py \
  -k "drop_in_example" > $r/example.log 2>&1; tail -3 $r/example.log
timeout 130 python3 scripts/fuzz_differential.py --device cuda --seconds 110 --seed 55 \
  --kinds flash flash_varlen > $r/fuzz.log 2>&1; tail -6 $r/fuzz.log
cd test/gpu
timeout 150 python3 bench_head_dims.py --dims 64 --lengths 1024 1536 2048 --sweep 192x128 \
  --rounds 2 --json $r/d64_short.json 2>&1 | tail -10 | tee $r/d64_short.log
