#!/usr/bin/env bash
# GPU call 2: vector stores with the TMA producer (both gained in call 1), then the DSL and
# block-mask GPU tests with vector stores as the default (flipped in the bundle's copy).
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run2; mkdir -p $r; s=$PWD/bench/results/2026-12-04-h200-s22
timeout 330 python3 $s/cubin_ab.py default vec:vector_stores=True vectma:vector_stores=True,tma_producer=True \
  vectmaonce:vector_stores=True,tma_producer=True,once=True --rounds 2 --json $r/cubin_ab.json 2>&1 | tee $r/cubin_ab.log
sed -i 's/vector_stores: bool = dataclasses.field(default=False/vector_stores: bool = dataclasses.field(default=True/' $w/python/tessel/cache.py
grep -n "vector_stores: bool" $w/python/tessel/cache.py
(cd test/gpu && timeout 200 python3 -m pytest -q -p no:cacheprovider test_python_gpu.py test_block_mask_gpu.py 2>&1 | tail -8 > $r/pytest_vec.log)
cat $r/pytest_vec.log
tar -C $OUT -czf $OUT/run2.tgz run2
