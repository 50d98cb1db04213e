#!/usr/bin/env bash
# Written in the twenty-fifth session (no device machine): the backward's key-rows dK/dV program
# at d128 spills 340-408 bytes at 64x64 on sm_90a and nothing with 32 query rows a step (32x64,
# ptxas, all features kept) — at half the wgmma N. One device call (< 600 s): the gradients with
# it (test_attention_backward_gpu.py's switch test), then bench_backward.py d128, default
# against --keyrows-blocks 32x64, one process each, two rounds.
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run5; mkdir -p $r
cd test/gpu
timeout 120 python3 -m pytest -q -p no:cacheprovider test_attention_backward_gpu.py -k "switches" 2>&1 | tail -6 | tee $r/switches.log
for round in 1 2; do for b in default 32x64; do
  timeout 100 python3 bench_backward.py --dims 128 --lengths 4096 16384 \
    $([ $b = default ] || echo --keyrows-blocks $b) --json $r/bwd_${b}_$round.json 2>&1 | tail -6 | tee -a $r/bwd.log
done; done
tar -C $OUT -czf $OUT/run5.tgz run5
