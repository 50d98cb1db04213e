#!/usr/bin/env bash
# Not run (written for the next session; call 6 was lost with the device machine): what this
# session's d64 change left unverified — test_python_gpu.py whole, the backward (its d64 cases
# run the 192x128 forward from 2048 tokens), the cold compile on the H200 host (issue 16's
# < 1 s bar: d64 192x128, d128 128x128), Q from the producer for d64's 4k causal rows, the
# fp16 + bf16 head-dim sweep with the new default.
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run7; mkdir -p $r
timeout 60 python3 scripts/bench_cold_compile.py --runs 3 --dims 64,128 --kinds full,long --build $w 2>&1 | tee $r/cold_compile.log | grep -E "^d|first_call|ptxas  "
(cd test/gpu
 timeout 200 python3 -m pytest -q -p no:cacheprovider test_python_gpu.py 2>&1 | tail -4 | tee $r/python.log
 for dt in fp16 bf16; do
   timeout 90 python3 bench_head_dims.py --dims 64 128 256 --dtype $dt --json $r/head_dims_$dt.json 2>&1 | tail -14 | tee $r/head_dims_$dt.log; done)
timeout 100 python3 $PWD/bench/results/2026-12-04-h200-s22/cubin_ab.py --d 64 b:blocks=192x128 once:blocks=192x128,once=True --rounds 2 --json $r/d64_once.json 2>&1 | tee $r/d64_once.log
tar -C $OUT -czf $OUT/run7.tgz run7
