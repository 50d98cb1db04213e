#!/usr/bin/env bash
# Thirtieth session, call 3: the seven masks beside FlexAttention on the defaults, then the
# twenty-seventh session's d256 persistent 128x64 against the default (d256 4k causal is
# 0.91-0.96 x cuDNN).
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run3; mkdir -p $r; ab=$PWD/bench/results/2026-12-04-h200-s22/cubin_ab.py
(cd test/gpu && timeout 260 python3 bench_block_mask.py --json $r/masks.json 2>&1 | tail -14 | tee $r/masks.log)
timeout 230 python3 $ab --d 256 default p:blocks=128x64 --rounds 2 --json $r/d256_persist.json 2>&1 | tail -12 | tee $r/d256_persist.log
