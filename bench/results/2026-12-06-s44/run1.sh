#!/usr/bin/env bash
# Forty-fourth session, first call: s43's next5.sh (trim_output_columns' serving DB cases and
# the backward's speed), then attention.BLOCK_HEAD_DIM_SPARSE's check (the block-sparse
# kernel's and backward's DB: test_block_mask_gpu.py `test_block_head_dim_block_sparse*`).
set -u
cd "$(dirname "$0")/../../.."
bash bench/results/2026-12-06-s43/next5.sh
source scripts/bundle-env.sh
r=$OUT/run1; mkdir -p $r
timeout 150 python3 -m pytest -q -p no:cacheprovider --tb=short test/gpu/test_block_mask_gpu.py \
  -k "block_head_dim_block_sparse" > $r/sparse.log 2>&1; tail -8 $r/sparse.log
