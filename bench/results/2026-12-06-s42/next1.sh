#!/usr/bin/env bash
# For the next session (one H100/H200; a bundle built after the forty-second session's last C++
# change, GpuOptions.trim_zero_columns): tessel.attention's padded head dims (96, 80, 40, 160)
# through the dense kernels' DB (attention.BLOCK_HEAD_DIM_CHIPS, empty until this passes):
# test_block_head_dim (48 cases against float32); then the same with S's k steps trimmed to D's
# columns (TESSEL_TEST_GPU_OPTIONS=trim_zero_columns=True), with varlen's and the KV cache's DB
# checks; the speed of both beside the padded default (bench_head_dims.py's `DB` cell) at 96
# and 80; the CUDA fuzzer. Where right and faster: BLOCK_HEAD_DIM_CHIPS = ("sm_90a",) (sm_80's
# code has not run), and trim_zero_columns on by default.
set -u
cd "$(dirname "$0")/../../.."
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/next1; mkdir -p $r
timeout 150 python3 -m pytest -q -p no:cacheprovider --tb=short test/gpu/test_python_gpu.py \
  -k "block_head_dim" > $r/check.log 2>&1; tail -20 $r/check.log
TESSEL_TEST_GPU_OPTIONS=trim_zero_columns=True timeout 150 python3 -m pytest -q \
  -p no:cacheprovider --tb=short test/gpu/test_python_gpu.py test/gpu/test_serving_gpu.py \
  -k "block_head_dim" > $r/check_trim.log 2>&1; tail -20 $r/check_trim.log
cd test/gpu
timeout 90 python3 bench_head_dims.py --dims 96 80 --lengths 1024 4096 16384 \
  --ab-block-head-dim --json $r/dims.json 2>&1 | tail -14 | tee $r/dims.log
TESSEL_TEST_GPU_OPTIONS=trim_zero_columns=True timeout 90 python3 bench_head_dims.py \
  --dims 96 80 --lengths 1024 4096 16384 --ab-block-head-dim --json $r/dims_trim.json 2>&1 \
  | tail -14 | tee $r/dims_trim.log
# The CUDA fuzzer, which now draws head dims 96 (padded, or DB for half of them) and 192, and
# the KV cache at 96/80 (DB, on).
cd ../..
timeout 100 python3 scripts/fuzz_differential.py --device cuda --seconds 80 --seed 42 \
  --kinds forward serving 2>&1 | tail -6 | tee $r/fuzz.log
