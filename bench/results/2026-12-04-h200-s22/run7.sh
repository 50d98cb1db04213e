#!/usr/bin/env bash
# GPU call 7: FP8 and persistent forward tests with the drain change (the FP8 kernels take the
# overlapped consumers too).
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run7; mkdir -p $r
cd test/gpu
timeout 100 python3 -m pytest -q -p no:cacheprovider test_fp8_gpu.py 2>&1 | tail -3 > $r/fp8.log
cat $r/fp8.log
timeout 110 python3 -m pytest -q -p no:cacheprovider test_persistent_gpu.py 2>&1 | tail -3 > $r/persistent.log
cat $r/persistent.log
