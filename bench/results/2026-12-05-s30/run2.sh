#!/usr/bin/env bash
# Thirtieth session, call 2: two more A/B rounds of each twenty-ninth-session switch (A: the
# switch off), then the seven masks beside FlexAttention and the host's cold compile.
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run2; mkdir -p $r; cd test/gpu
timeout 150 python3 ab_gpu_options.py $r/even --grid attention.EVEN_KEYS=False \
  --cases dense d64 --rounds 2 --timeout 70 2>&1 | tail -13 | tee $r/even.log
timeout 120 python3 ab_gpu_options.py $r/diagonal --grid attention.DIAGONAL_BLOCK_FIRST=False \
  --cases dense --rounds 2 --timeout 55 2>&1 | tail -7 | tee $r/diagonal.log
timeout 230 python3 bench_block_mask.py --json $r/masks.json 2>&1 | tail -14 | tee $r/masks.log
cd ../..; timeout 80 python3 scripts/bench_cold_compile.py --runs 2 --dims 256,128,64 \
  --kinds full,causal-long,ragged --build $w 2>&1 | grep -E "^d|ptxas  |first_call" | tee $r/cold.log
