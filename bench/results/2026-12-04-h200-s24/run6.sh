#!/usr/bin/env bash
# GPU call 6: the cold compile on the H200 host (issue 16's < 1 s bar, both kinds at d64 and
# d128); d64 192x128 with Q from the producer at every length against the policy (4k causal
# rows visit 16.5 key blocks on average: just past grid.PRODUCER_ONCE_MAX_BLOCKS); then
# test_python_gpu.py whole (run5's limit cut it at 139 of 169).
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run6; mkdir -p $r
timeout 90 python3 scripts/bench_cold_compile.py --runs 3 --dims 64,128 --kinds causal,full --build $w 2>&1 | tee $r/cold_compile.log | tail -30
timeout 150 python3 $PWD/bench/results/2026-12-04-h200-s22/cubin_ab.py --d 64 b128:blocks=192x128 once:blocks=192x128,once=True --rounds 2 --json $r/d64_once.json 2>&1 | tee $r/d64_once.log
(cd test/gpu; timeout 240 python3 -m pytest -q -p no:cacheprovider test_python_gpu.py 2>&1 | tail -6 > $r/python.log; cat $r/python.log)
tar -C $OUT -czf $OUT/run6.tgz run6
