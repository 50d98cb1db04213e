#!/usr/bin/env bash
# GPU call 5: the masks beside FlexAttention (issue 13's run) with vector stores and the TMA
# producer as the defaults, fp16 then bf16.
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
sed -i -E 's/(vector_stores|tma_producer): bool = dataclasses.field\(default=False/\1: bool = dataclasses.field(default=True/' $w/python/tessel/cache.py
r=$OUT/run5; mkdir -p $r; cd test/gpu
for dt in fp16 bf16; do
  timeout 230 python3 bench_block_mask.py --dtype $dt --json $r/masks_$dt.json 2>&1 | tail -14 | tee $r/masks_$dt.log; done
tar -C $OUT -czf $OUT/run5.tgz run5
