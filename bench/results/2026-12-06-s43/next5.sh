#!/usr/bin/env bash
# For the next session (one call): GpuOptions.trim_output_columns is on since a partial check
# (next5a/: the forward's DB 32/32, the backward's 8/8, d96 forward +2-6 %). What did not run
# under it: the serving kernels' DB cases (varlen, KV cache, split-KV: P·V at N = 96 in their
# own kernels), the rest of the forward and backward DB cases, and the backward's speed. If a
# case fails, turn it off (cache.py, Pipeline.h, Pipeline.cpp, Passes.td) and say why.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/next5; mkdir -p $r
timeout 300 python3 -m pytest -q -p no:cacheprovider --tb=short test/gpu/test_python_gpu.py \
  test/gpu/test_attention_backward_gpu.py test/gpu/test_serving_gpu.py \
  -k "block_head_dim or padded_head_dims" > $r/check.log 2>&1; tail -12 $r/check.log
cd test/gpu
for o in trim_output_columns=False ""; do
  TESSEL_TEST_GPU_OPTIONS=$o timeout 60 python3 bench_backward.py --dims 96 --lengths 4096 16384 \
    --json $r/bwd96${o:+_off}.json 2>&1 | tail -6 | tee $r/bwd96${o:+_off}.log
  TESSEL_TEST_GPU_OPTIONS=$o timeout 60 python3 bench_decode.py --dim 96 2>&1 | tail -6 \
    | tee $r/decode96${o:+_off}.log
done
