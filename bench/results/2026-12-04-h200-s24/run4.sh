#!/usr/bin/env bash
# GPU call 4: 192x128 with 3 stages (cubin_ab.py reads numbers now) beside 2, at d64; 2 rounds.

set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run4; mkdir -p $r
timeout 280 python3 $PWD/bench/results/2026-12-04-h200-s22/cubin_ab.py --d 64 b128:blocks=192x128 b128s3:blocks=192x128,num_stages=3 --rounds 2 --json $r/d64_ab.json 2>&1 | tee $r/d64_ab.log
tar -C $OUT -czf $OUT/run4.tgz run4
