#!/usr/bin/env bash
# Carried over from the twenty-fourth session (its run7.sh, never run: no machine was lent in
# the twenty-fifth either). Two device calls: `run2.sh 1`, then `run2.sh 2` (each under 600 s).
# 1: the cold compile on the H200 host (issue 16's < 1 s bar: d64 192x128, d128 128x128),
#    test_python_gpu.py whole (run5 ran 139 of 169; d256 with affine biases added: 128x32),
#    the fp16 + bf16 head-dim sweep with d64's new default.
# 2: Q from the producer for d64's 4k causal rows; d256 with mods at 128x32 (GPU_BLOCKS_MODS,
#    chosen for 0 spill): the block-mask tests (d256 added) and its speed against 128x64.
set -u
part=${1:?1 or 2}
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run2-$part; mkdir -p $r; ab=$PWD/bench/results/2026-12-04-h200-s22/cubin_ab.py
if [ $part = 1 ]; then
  timeout 60 python3 scripts/bench_cold_compile.py --runs 3 --dims 64,128 --kinds full,long \
    --build $w 2>&1 | tee $r/cold_compile.log | grep -E "^d|first_call|ptxas  "
  cd test/gpu
  timeout 260 python3 -m pytest -q -p no:cacheprovider test_python_gpu.py 2>&1 | tail -4 | tee $r/python.log
  for dt in fp16 bf16; do
    timeout 100 python3 bench_head_dims.py --dims 64 128 256 --dtype $dt \
      --json $r/head_dims_$dt.json 2>&1 | tail -14 | tee $r/head_dims_$dt.log; done
else
  timeout 100 python3 $ab --d 64 b:blocks=192x128 once:blocks=192x128,once=True --rounds 2 \
    --json $r/d64_once.json 2>&1 | tee $r/d64_once.log
  cd test/gpu
  timeout 170 python3 -m pytest -q -p no:cacheprovider test_block_mask_gpu.py 2>&1 | tail -4 | tee $r/block_mask.log
  for b in default 128x64; do
    timeout 120 python3 bench_block_mask.py --d 256 --h 8 --cases document alibi softcap rel_bias \
      $([ $b = default ] || echo --blocks $b) --json $r/d256_mods_$b.json 2>&1 | tail -6 | tee $r/d256_mods_$b.log; done
fi
tar -C $OUT -czf $OUT/run2-$part.tgz -C $OUT run2-$part
