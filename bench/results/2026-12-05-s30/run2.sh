#!/usr/bin/env bash
# Thirtieth session, call 2: A/B rounds of the key-loop switches (A: the switch off) — the
# last key block first (d128 non-causal, whole and ragged key lengths; A: EVEN_N or the
# split) and the host's cold compile first, then EVEN_N at d64 and the diagonal first (in
# the order of what matters most: the call's time limit may cut the last).
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run2; mkdir -p $r; cd test/gpu
timeout 200 python3 ab_gpu_options.py $r/tail --grid attention.TAIL_BLOCK_FIRST=False \
  --cases dense ragged --rounds 2 --timeout 70 2>&1 | tail -10 | tee $r/tail.log
(cd ../.. && timeout 80 python3 scripts/bench_cold_compile.py --runs 2 --dims 256,128,64 \
  --kinds full,causal-long,ragged --build $w 2>&1 | grep -E "^d|ptxas  |first_call" | tee $r/cold.log)
timeout 110 python3 ab_gpu_options.py $r/even --grid attention.EVEN_KEYS=False \
  --cases d64 --rounds 2 --timeout 50 2>&1 | tail -7 | tee $r/even.log
timeout 110 python3 ab_gpu_options.py $r/diagonal --grid attention.DIAGONAL_BLOCK_FIRST=False \
  --cases dense --rounds 2 --timeout 55 2>&1 | tail -7 | tee $r/diagonal.log
