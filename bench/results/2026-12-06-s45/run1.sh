#!/usr/bin/env bash
# Forty-fifth session, first call (a new bundle: gathers on the row-blocked lowering, the block
# masks classified by block_state_kernel in registers). The GPU suites that run programs with
# gathers (block masks, captured tensors, tile programs), then bench_block_mask at d128 (its
# "bm ms" column: tessel.block_mask's time beside create_block_mask's, was 2.0-3.3 ms against
# 1.7-5.6 on s44's H100), then s44's VARLEN_BLOCK_HEAD_DIM_GRAD check.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run1; mkdir -p $r
OUT=$r/check TESSEL_GPU_CHECK_SHARDS=2 TESSEL_GPU_CHECK_JOBS=6 \
  TESSEL_GPU_CHECK_ONLY="block_mask_gpu captured_gpu tile_programs" \
  timeout 300 bash scripts/gpu-check.sh > $r/suites.log 2>&1
grep -E "passed|failed|error" $r/suites.log | tail -8
(cd test/gpu && timeout 150 python3 bench_block_mask.py --json $r/masks128.json) \
  > $r/masks128.log 2>&1; tail -10 $r/masks128.log
timeout 120 python3 -m pytest -q -p no:cacheprovider --tb=short test/gpu/test_serving_gpu.py \
  -k "varlen_block_head_dim_gradients" > $r/varlen_grad.log 2>&1; tail -4 $r/varlen_grad.log
timeout 150 python3 bench/results/2026-12-06-s45/block_mask_long.py > $r/block_mask_long.log 2>&1
tail -8 $r/block_mask_long.log
