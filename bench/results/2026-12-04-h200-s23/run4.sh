#!/usr/bin/env bash
# GPU call 4: the backward and DSL GPU tests with vector stores and the TMA producer as the defaults (both
# flipped in the bundle's copy of tessel/cache.py).
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
sed -i -E 's/(vector_stores|tma_producer): bool = dataclasses.field\(default=False/\1: bool = dataclasses.field(default=True/' $w/python/tessel/cache.py
grep -n "vector_stores: bool\|tma_producer: bool" $w/python/tessel/cache.py
r=$OUT/run4; mkdir -p $r; cd test/gpu
for t in attention_backward:370 python:200; do n=${t%:*}
  timeout ${t#*:} python3 -m pytest -q -p no:cacheprovider test_${n}_gpu.py 2>&1 | tail -6 > $r/$n.log
  echo "== $n"; cat $r/$n.log; done
tar -C $OUT -czf $OUT/run4.tgz run4
