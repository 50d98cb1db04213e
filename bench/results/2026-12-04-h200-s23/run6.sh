#!/usr/bin/env bash
# GPU call 6 (after the spill chain landed): the masks beside FlexAttention (fp16), bf16 over
# head dims with d64 at 128x128 beside its default, d256 persistent at 128x64 (correctness,
# then against the default).
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run6; mkdir -p $r; s=$PWD/bench/results/2026-12-04-h200-s23
(cd test/gpu
 timeout 110 python3 bench_block_mask.py --dtype fp16 --json $r/masks_fp16.json 2>&1 | tail -10 | tee $r/masks_fp16.log
 timeout 100 python3 bench_head_dims.py --dims 64 128 256 --dtype bf16 --sweep 128x128 --json $r/head_dims_bf16.json 2>&1 | tail -16 | tee $r/head_dims_bf16.log)
timeout 45 python3 $s/check_blocks.py 2>&1 | tee $r/check_blocks.log | tail -3
timeout 100 python3 $PWD/bench/results/2026-12-04-h200-s22/cubin_ab.py --d 256 default p64:persist=128x64 --rounds 1 --json $r/d256_persist.json 2>&1 | tee $r/d256_persist.log
tar -C $OUT -czf $OUT/run6.tgz run6
