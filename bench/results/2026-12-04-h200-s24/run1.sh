#!/usr/bin/env bash
# GPU call 1 (twenty-fourth session): issue 13's run — bench_block_mask.py, all seven masks, fp16
# then bf16, at main 6a909e8 (the spill chain); then the fp16 head-dim sweep of issue 16.
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run1; mkdir -p $r; cd test/gpu
for dt in fp16 bf16; do
  timeout 230 python3 bench_block_mask.py --dtype $dt --json $r/masks_$dt.json 2>&1 | tail -14 | tee $r/masks_$dt.log; done
timeout 95 python3 bench_head_dims.py --dims 64 128 256 --dtype fp16 --json $r/head_dims_fp16.json 2>&1 | tail -16 | tee $r/head_dims_fp16.log
tar -C $OUT -czf $OUT/run1.tgz run1
