#!/usr/bin/env bash
# For a later call: the timings behind next1's checks — the block-sparse backward at d256 (one
# program / split / split with the dK program on 32 query rows; sparse_bwd.py), then the dense
# d256 backward with each candidate beside FA2 and cuDNN (bench_backward.py), one process each.
set -u
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/next2; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
for d in 256 128; do
  timeout 150 python3 bench/results/2026-12-06-s39/sparse_bwd.py --d $d 2>&1 | tail -9 | tee -a $r/sparse.log
done
cd test/gpu
for v in "" "--dk-block-m 32" "--dq-blocks 64x32" "--dk-block-m 32 --dq-blocks 64x32"; do
  timeout 90 python3 bench_backward.py --dims 256 --lengths 4096 16384 $v 2>&1 | tail -5 \
    | tee -a $r/dense.log
done
