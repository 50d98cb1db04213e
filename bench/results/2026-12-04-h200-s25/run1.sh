#!/usr/bin/env bash
# Written in the twenty-fifth session, which had no device machine: the first GPU run of FP8
# head dim 256 (V kept transposed in 64- and 32-byte rows with wgmma's swizzle of their width).
# One device call (< 600 s): test_fp8_gpu.py whole (d128 as before; d256 at 128x64, and with a
# score_mod or mask_mod at 128x32 for both head dims), then the FP8 speed at d128 and d256 beside
# our fp16 and cuDNN / FA2. If the d256 tests pass: attention_fp8.FP8_HEAD_DIMS = (128, 256).
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run1; mkdir -p $r
cd test/gpu
timeout 240 python3 -m pytest -q -p no:cacheprovider test_fp8_gpu.py 2>&1 | tail -30 | tee $r/fp8_tests.log
timeout 240 python3 bench_fp8.py --dims 128 256 --lengths 1024 4096 16384 --json $r/fp8_speed.json \
  2>&1 | tail -16 | tee $r/fp8_speed.log
tar -C $OUT -czf $OUT/run1.tgz run1
