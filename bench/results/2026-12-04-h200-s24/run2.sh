#!/usr/bin/env bash
# GPU call 2: d64 on three consumer warpgroups (192-row blocks, persistent, TMA) — correctness
# against float32, then beside cuDNN and the 64x128 default in one process (fp16, bf16), then
# an A/B of the dense default against 192x128 (2 and 3 stages) and 192x64, one process each.
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run2; mkdir -p $r; s=$PWD/bench/results/2026-12-04-h200-s24
timeout 80 python3 $s/check_d64_blocks.py 2>&1 | tee $r/check_d64.log | tail -4
(cd test/gpu
 for dt in fp16 bf16; do
   timeout 80 python3 bench_head_dims.py --dims 64 --dtype $dt --sweep 192x128 192x64 --json $r/d64_$dt.json 2>&1 | tail -6 | tee $r/d64_$dt.log; done)
timeout 240 python3 $PWD/bench/results/2026-12-04-h200-s22/cubin_ab.py --d 64 default b128:blocks=192x128 b128s3:blocks=192x128,num_stages=3 b64:blocks=192x64 --rounds 1 --json $r/d64_ab.json 2>&1 | tee $r/d64_ab.log
tar -C $OUT -czf $OUT/run2.tgz run2
