#!/usr/bin/env bash
# Run in the twenty-sixth session (the third call): the twenty-fifth session's run1 (FP8 at
# head dim 256: test_fp8_gpu.py whole, then bench_fp8.py at d128 and d256) and the
# correctness half of its run3 (sm_80 cubins of the shipped defaults on the H200).
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/now3; mkdir -p $r
cd test/gpu
timeout 220 python3 -m pytest -q -p no:cacheprovider test_fp8_gpu.py -rf --tb=line 2>&1 | tail -20 | tee $r/fp8_tests.log
timeout 130 python3 bench_fp8.py --dims 128 256 --lengths 4096 16384 --json $r/fp8_speed.json \
  2>&1 | tail -12 | tee $r/fp8_speed.log
timeout 180 python3 -m pytest -q -p no:cacheprovider test_sm80_code_gpu.py -rf --tb=line 2>&1 | tail -12 | tee $r/sm80_tests.log
tar -C $OUT -czf $OUT/now3.tgz now3
