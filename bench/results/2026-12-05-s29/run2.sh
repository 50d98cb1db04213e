#!/usr/bin/env bash
# Twenty-ninth session: attention.DIAGONAL_BLOCK_FIRST (off) — d128 causal rows at 128x128 run
# their diagonal block first as the overlapped consumers' peel (48 -> 32 wgmma). Its bits
# (test_persistent_gpu.py -k diagonal), its A/B against the default on the dense cases (the
# causal 4k and 16k rows change; 1k causal and the non-causal rows are the same kernel on both
# sides: their A/B is the noise), the cold compile on the host. Flip the default where it wins.
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run2; mkdir -p $r; cd test/gpu
timeout 200 python3 -m pytest -q -p no:cacheprovider test_persistent_gpu.py -k diagonal \
  2>&1 | tail -6 | tee $r/diagonal.log
timeout 330 python3 ab_gpu_options.py $r/ab --grid attention.DIAGONAL_BLOCK_FIRST=True \
  --cases dense --rounds 2 2>&1 | tail -14 | tee $r/ab.log
cd ../..; timeout 60 python3 scripts/bench_cold_compile.py --runs 2 --dims 128 \
  --kinds causal-long --build $w 2>&1 | grep -E "^d|ptxas  |first_call" | tee $r/cold.log
timeout 60 python3 scripts/bench_cold_compile.py --runs 2 --dims 128 --kinds causal-long \
  --switch DIAGONAL_BLOCK_FIRST=True --build $w 2>&1 | grep -E "^d|ptxas  |first_call" \
  | tee -a $r/cold.log
