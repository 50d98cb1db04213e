#!/usr/bin/env bash
# Twenty-second session, GPU call 1: the softmax-turns schedule (overlap_consumers=False):
# correctness over the forward cases, then speed against the default (one process a config).
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run1; mkdir -p $r; cd test/gpu
timeout 200 python3 check_warp_specialize.py --set overlap_consumers=False --json $r/check_sync.json 2>&1 | tail -15 | tee $r/check_sync.log
timeout 330 python3 ab_gpu_options.py $r/ab --set overlap_consumers=False --rounds 2 --cases dense --timeout 80 2>&1 | tee $r/ab.log
tar -C $OUT -czf $OUT/run1.tgz run1
