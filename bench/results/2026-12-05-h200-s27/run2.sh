#!/usr/bin/env bash
# Twenty-seventh session, call 2: d256's dense kernel (128x64, not persistent) against the same
# blocks persistent (causal: longest rows first) — d256 4k causal is 0.91-0.96 x cuDNN; then the
# backward's key-rows program at 32x64 (s25 run5, one round).
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run2; mkdir -p $r; ab=$PWD/bench/results/2026-12-04-h200-s22/cubin_ab.py
timeout 230 python3 $ab --d 256 default p:blocks=128x64 --rounds 2 --json $r/d256_persist.json 2>&1 | tee $r/d256_persist.log
cd test/gpu
timeout 90 python3 -m pytest -q -p no:cacheprovider test_attention_backward_gpu.py -k "switches" 2>&1 | tail -4 | tee $r/switches.log
for b in default 32x64; do
  timeout 90 python3 bench_backward.py --dims 128 --lengths 4096 16384 \
    $([ $b = default ] || echo --keyrows-blocks $b) --json $r/bwd_$b.json 2>&1 | tail -6 | tee -a $r/bwd.log
done
tar -C $OUT -czf $OUT/run2.tgz -C $OUT run2
