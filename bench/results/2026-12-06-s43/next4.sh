#!/usr/bin/env bash
# For the next session (one H100/H200 call; the bundle of the forty-third session has every C++
# change since): attention.BLOCK_HEAD_DIM_MASKS (window_size and other mask_mods that read no
# tensor at head dims the fast paths pad, inside the kernels; off until this passes) — its GPU
# check, then the Python GPU suite whole on the forty-third session's defaults (trim_zero_columns,
# both BLOCK_HEAD_DIM_CHIPS, Q by descriptor beside a P of its width). If the check passes, turn
# BLOCK_HEAD_DIM_MASKS on (attention.py, test_attention_backward.py's and test_gpu_dispatch.py's
# route tests). Then, one call each: TESSEL_GPU_CHECK_ONLY="serving_gpu", "backward_gpu",
# "persistent_gpu" with scripts/gpu-check.sh (TESSEL_GPU_CHECK_SHARDS=3 TESSEL_GPU_CHECK_JOBS=6).
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/next4; mkdir -p $r
timeout 150 python3 -m pytest -q -p no:cacheprovider --tb=short test/gpu/test_attention_backward_gpu.py \
  -k "block_head_dim_with_masks" > $r/masks.log 2>&1; tail -8 $r/masks.log
TESSEL_GPU_CHECK_SHARDS=3 TESSEL_GPU_CHECK_JOBS=6 TESSEL_GPU_CHECK_ONLY="python_gpu" timeout 400 \
  bash scripts/gpu-check.sh > $r/python_gpu.log 2>&1; tail -15 $r/python_gpu.log
