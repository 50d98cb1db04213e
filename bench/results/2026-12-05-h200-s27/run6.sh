#!/usr/bin/env bash
# Twenty-seventh session, after fuse_masked_loops was limited to masked scores that feed the
# softmax as they are: test_python_gpu.py's score_mod cases under the switch (the affine
# biases of run3/run5 now stay split), the band test by default, then Q from the producer for d64's 4k causal rows
# (cubin_ab: the 192x128 kernel with and without producer_once, one round; s24 run7 part 2;
# only with `run6.sh all`: the twenty-seventh session's device time ran out).
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run6; mkdir -p $r; ab=$PWD/bench/results/2026-12-04-h200-s22/cubin_ab.py
( cd test/gpu && timeout 60 python3 -m pytest -q -p no:cacheprovider test_python_gpu.py -k band \
    2>&1 | tail -5 | tee $r/band_default.log )
( cd test/gpu && TESSEL_TEST_GPU_OPTIONS=fuse_masked_loops=True timeout 80 python3 -m pytest -q \
    -p no:cacheprovider test_python_gpu.py -k "affine or band" 2>&1 | tail -5 | tee $r/fused_python.log )
[ "${1:-}" = all ] && timeout 100 python3 $ab --d 64 b:blocks=192x128 once:blocks=192x128,once=True \
  --rounds 1 --json $r/d64_once.json 2>&1 | tee $r/d64_once.log
