#!/usr/bin/env bash
# Twenty-third session, GPU call 1: the two options built last session and never run —
# vector stores (correctness over the forward cases) and the TMA producer's 3-D maps
# (test_persistent_gpu.py -k tma) — then both against the default (one process a config).
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run1; mkdir -p $r; s=$PWD/bench/results/2026-12-04-h200-s22
(cd test/gpu && timeout 100 python3 check_warp_specialize.py --set vector_stores=True 2>&1 | tail -4 > $r/check_vec.log
 timeout 110 python3 -m pytest -q -x -p no:cacheprovider test_persistent_gpu.py -k tma 2>&1 | tail -15 > $r/tma.log)
cat $r/*.log
timeout 350 python3 $s/cubin_ab.py default vec:vector_stores=True tma:tma_producer=True \
  tmaonce:tma_producer=True,once=True --rounds 2 --json $r/cubin_ab.json 2>&1 | tee $r/cubin_ab.log
tar -C $OUT -czf $OUT/run1.tgz run1
