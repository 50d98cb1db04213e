#!/usr/bin/env bash
# Thirty-first session, third call: the backward's compile on the host (one thread against the
# default, which compiles Δ, key-rows and dQ side by side), then two A/B rounds each of the
# twenty-ninth session's EVEN_N and diagonal-first defaults (A: the switch off).
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PATH=$w/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
r=$OUT/run3; mkdir -p $r
timeout 60 python3 scripts/bench_backward_compile.py --runs 2 --dims 128 --build $w 2>&1 \
  | tee $r/backward_compile.log
export PYTHONPATH=$w/python TESSEL_CACHE_DIR=$w/cache
cd test/gpu
timeout 120 python3 ab_gpu_options.py $r/diagonal --grid attention.DIAGONAL_BLOCK_FIRST=False \
  --cases dense --rounds 2 --timeout 55 2>&1 | tail -7 | tee $r/diagonal.log
timeout 150 python3 ab_gpu_options.py $r/even --grid attention.EVEN_KEYS=False \
  --cases dense d64 --rounds 2 --timeout 70 2>&1 | tail -13 | tee $r/even.log
