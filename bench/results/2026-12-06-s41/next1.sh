#!/usr/bin/env bash
# For the next session (one H100/H200; needs a bundle built after 54f7382, the occupancy fix):
# 1. d192 native and the DV kernel on [B, N, H, D] views (test_native_strided_views, 12 cases):
#    where right, attention.NATIVE_STRIDED = True;
# 2. the backward suite whole, four shards side by side (it hung at d64 64x128 before the fix);
# then bench/results/2026-12-06-s38/next2.sh (issue 16's sweep) in its own call.
set -u
cd "$(dirname "$0")/../../.."
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
r=$OUT/next1; mkdir -p $r
PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache \
  timeout 120 python3 -m pytest -q -p no:cacheprovider test/gpu/test_python_gpu.py \
  -k "native_strided_views" 2>&1 | tail -15 | tee $r/strided.log
TESSEL_GPU_CHECK_SHARDS=4 TESSEL_GPU_CHECK_JOBS=4 TESSEL_GPU_CHECK_PLOTS=0 \
  TESSEL_GPU_CHECK_ONLY=backward_gpu timeout 420 bash scripts/gpu-check.sh 2>&1 | tail -40
