#!/usr/bin/env bash
# Twenty-ninth session, third GPU call, after DIAGONAL_BLOCK_FIRST became the default: the
# persistent suite's EVEN_N, diagonal and dense cases on the new default (test_even_keys' d256
# expectation fixed), then two more A/B rounds of each switch (A: the switch off).
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/confirm; mkdir -p $r; cd test/gpu
timeout 260 python3 -m pytest -q -p no:cacheprovider test_persistent_gpu.py \
  -k "diagonal or even_keys or dense" 2>&1 | tail -6 | tee $r/persistent.log
timeout 150 python3 ab_gpu_options.py $r/even --grid attention.EVEN_KEYS=False \
  --cases dense d64 --rounds 2 --timeout 70 2>&1 | tail -13 | tee $r/even.log
timeout 120 python3 ab_gpu_options.py $r/diagonal --grid attention.DIAGONAL_BLOCK_FIRST=False \
  --cases dense --rounds 2 --timeout 55 2>&1 | tail -7 | tee $r/diagonal.log
