#!/usr/bin/env bash
# Twenty-ninth session, second GPU call: speed of EVEN_N (on) against the general kernel, and
# of DIAGONAL_BLOCK_FIRST (off) against the default, one process a configuration (A B per
# round), then the cold compile on the host: whole key blocks, ragged, causal-long with and
# without the diagonal first.
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/ab; mkdir -p $r; cd test/gpu
timeout 220 python3 ab_gpu_options.py $r/even --grid attention.EVEN_KEYS=False \
  --cases dense d64 --rounds 1 --timeout 100 2>&1 | tail -14 | tee $r/even.log
timeout 170 python3 ab_gpu_options.py $r/diagonal --grid attention.DIAGONAL_BLOCK_FIRST=True \
  --cases dense --rounds 1 --timeout 80 2>&1 | tail -8 | tee $r/diagonal.log
cd ../..; timeout 70 python3 scripts/bench_cold_compile.py --runs 2 --dims 128 \
  --kinds full,ragged,causal-long --build $w 2>&1 | grep -E "^d|ptxas  |first_call" | tee $r/cold.log
timeout 40 python3 scripts/bench_cold_compile.py --runs 2 --dims 128 --kinds causal-long \
  --switch DIAGONAL_BLOCK_FIRST=True --build $w 2>&1 | grep -E "^d|ptxas  |first_call" \
  | tee -a $r/cold.log
