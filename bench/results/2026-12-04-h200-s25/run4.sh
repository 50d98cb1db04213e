#!/usr/bin/env bash
# Written in the twenty-fifth session (no device machine): the persistent dense kernels that
# are not causal now count their tiles round-robin instead of reading the schedule at each tile
# head (grid.dense_tiles). One device call (< 600 s): test_persistent_gpu.py (bit for bit
# against one program a tile, and against float32) and check_warp_specialize.py.
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run4; mkdir -p $r
cd test/gpu
# (The twenty-sixth session's pipelined and d64 schedules are s26 run1's: left out here so that
# this stays within its 280 seconds.)
timeout 280 python3 -m pytest -q -p no:cacheprovider test_persistent_gpu.py -k "not pipeline and not d64_schedules" 2>&1 | tail -8 | tee $r/persistent.log
timeout 280 python3 check_warp_specialize.py 2>&1 | tail -8 | tee $r/warp_specialize.log
tar -C $OUT -czf $OUT/run4.tgz run4
