#!/usr/bin/env bash
# For the next session's first call. On an H200: issue 16's sweep (run2.sh). Anywhere: d64
# causal below 2k keys at 192x128 with ALIGN_END against the default 64x128. At 1k, 192x128
# ran 3-7 % slower before alignment; its cut-short last block then saw every key.
set -u
cd "$(dirname "$0")/../../.."
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash bench/results/2026-12-07-s54/run2.sh
fi
source scripts/bundle-env.sh
r=$OUT/next1; mkdir -p $r
export TESSEL_CACHE_DIR=$(mktemp -d)
cd test/gpu
timeout 200 python3 bench_head_dims.py --dims 64 --lengths 1024 1536 2048 --sweep 192x128 \
  --rounds 2 --json $r/d64_short.json 2>&1 | tail -10 | tee $r/d64_short.log
