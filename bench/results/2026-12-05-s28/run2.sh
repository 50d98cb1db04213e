#!/usr/bin/env bash
# Twenty-eighth session: speed on the new defaults, beside the anchors in one process each —
# the seven masks beside FlexAttention (block tables now read once a block: the block_sparse
# case's kernel keeps its overlap, fold and vector stores), the dense forward beside cuDNN
# (sync_masked_loops on), the cold compile on the host (d256's one compile).
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run2; mkdir -p $r; cd test/gpu
timeout 260 python3 bench_block_mask.py --json $r/masks.json 2>&1 | tail -14 | tee $r/masks.log
timeout 200 python3 ab_gpu_options.py $r/ab --set sync_masked_loops=False --cases dense \
  --rounds 1 2>&1 | tail -8 | tee $r/ab.log
cd ../..; timeout 100 python3 scripts/bench_cold_compile.py --runs 2 --dims 256,128,64 \
  --kinds full,causal --build $w 2>&1 | grep -E "^d|ptxas  |first_call" | tee $r/cold.log
