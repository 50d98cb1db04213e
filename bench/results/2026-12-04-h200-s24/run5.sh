#!/usr/bin/env bash
# GPU call 5: d64's 192x128 as the default (kernels without mods from 2048 keys) — the GPU
# tests that run it (persistent, python_gpu) and check_warp_specialize (the two-warpgroup
# kernels, whose registers and TMA rule the same change touched); then d64 beside cuDNN, fp16
# and bf16, with the default and 64x128 in one process.
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run5; mkdir -p $r; cd test/gpu
timeout 90 python3 check_warp_specialize.py 2>&1 | tail -3 > $r/check_ws.log; cat $r/check_ws.log
for t in persistent:190 python:150; do n=${t%:*}
  timeout ${t#*:} python3 -m pytest -q -p no:cacheprovider test_${n}_gpu.py 2>&1 | tail -6 > $r/$n.log
  echo "== $n"; cat $r/$n.log; done
for dt in fp16 bf16; do
  timeout 50 python3 bench_head_dims.py --dims 64 --dtype $dt --sweep 64x128 --json $r/d64_$dt.json 2>&1 | tail -6 | tee $r/d64_$dt.log; done
tar -C $OUT -czf $OUT/run5.tgz run5
