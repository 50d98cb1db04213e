#!/usr/bin/env bash
# Run in the twenty-sixth session once a machine was lent (late in the session, ~30 minutes of
# device time): the correctness half of s25 run4 and s26 run1/run3 in one call —
# test_persistent_gpu.py whole (the round-robin tile loop that is on by default, pipelined
# tiles bit for bit, d64's schedules), then the FP8 overlapped consumers' float64 checks.
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/now1; mkdir -p $r
cd test/gpu
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee $r/gpu.txt
timeout 330 python3 -m pytest -q -p no:cacheprovider test_persistent_gpu.py -rf 2>&1 | tail -15 | tee $r/persistent.log
timeout 170 python3 -m pytest -q -p no:cacheprovider test_fp8_gpu.py -k overlapped -rf 2>&1 | tail -12 | tee $r/fp8_overlap.log
tar -C $OUT -czf $OUT/now1.tgz now1
