#!/usr/bin/env bash
# Thirtieth session, call 3: the seven masks beside FlexAttention on the defaults; d64 with Q
# from the producer up to 40 key blocks a tile (A; d64 4k causal's tiles visit 16.5 on average,
# just past PRODUCER_ONCE_MAX_BLOCKS = 16: 0.92-0.94 x cuDNN); the twenty-seventh session's
# d256 persistent 128x64 against the default (d256 4k causal is 0.91-0.96 x cuDNN).
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run3; mkdir -p $r; ab=$PWD/bench/results/2026-12-04-h200-s22/cubin_ab.py
(cd test/gpu && timeout 260 python3 bench_block_mask.py --json $r/masks.json 2>&1 | tail -14 | tee $r/masks.log)
(cd test/gpu && timeout 130 python3 ab_gpu_options.py $r/once --grid grid.PRODUCER_ONCE_MAX_BLOCKS=40 \
  --cases d64 --rounds 2 --timeout 55 2>&1 | tail -7 | tee $r/once.log)
timeout 180 python3 $ab --d 256 default p:blocks=128x64 --rounds 2 --json $r/d256_persist.json 2>&1 | tail -12 | tee $r/d256_persist.log
