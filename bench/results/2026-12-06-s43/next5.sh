#!/usr/bin/env bash
# For the next session (one call; a bundle built after the forty-third session's last C++
# change, GpuOptions.trim_output_columns): the dots of a B block read as stored computing only
# the output columns its copies fill (P·V at d96 as wgmma N = 96; the backward's dV, dK, dQ),
# off until this passes. Whether wgmma reads an N-major 128-byte-swizzled B of N = 96 (a slab
# and a half) right is what the GPU says: the DB checks of the forward, the backward and
# serving under TESSEL_TEST_GPU_OPTIONS=trim_output_columns=True against float32/float64, then
# the speed beside the default at d96 and d80. If right and faster: default True (cache.py,
# Pipeline.h, Pipeline.cpp, Passes.td; tesselc --no-trim-output-columns; key ";no-...").
set -u
cd "$(dirname "$0")/../../.."
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/next5; mkdir -p $r
TESSEL_TEST_GPU_OPTIONS=trim_output_columns=True timeout 240 python3 -m pytest -q -p no:cacheprovider \
  --tb=short test/gpu/test_python_gpu.py test/gpu/test_attention_backward_gpu.py test/gpu/test_serving_gpu.py \
  -k "block_head_dim or padded_head_dims" > $r/check.log 2>&1; tail -12 $r/check.log
cd test/gpu
for o in "" trim_output_columns=True; do
  TESSEL_TEST_GPU_OPTIONS=$o timeout 70 python3 bench_head_dims.py --dims 96 80 --lengths 1024 4096 16384 \
    --json $r/dims${o:+_out}.json 2>&1 | tail -14 | tee $r/dims${o:+_out}.log
  TESSEL_TEST_GPU_OPTIONS=$o timeout 60 python3 bench_backward.py --dims 96 --lengths 4096 16384 \
    --json $r/bwd96${o:+_out}.json 2>&1 | tail -6 | tee $r/bwd96${o:+_out}.log
done
