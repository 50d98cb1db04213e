#!/usr/bin/env bash
# GPU call 2: the backward's GPU tests (not completed last session) and its kernels' times
# with and without the scale fold (the spill policy: the spilling key-rows program is generic).
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run2; mkdir -p $r
(cd bench/results/2026-12-04-h200-s21 && timeout 120 python3 bwd_kernels_ab.py 2>&1 | tail -40 > $r/bwd_kernels.log)
cd test/gpu
timeout 430 python3 -m pytest -q -x -p no:cacheprovider test_attention_backward_gpu.py 2>&1 | tail -15 > $r/backward_tests.log
tar -C $OUT -czf $OUT/run2.tgz run2
cat $r/*.log
