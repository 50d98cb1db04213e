#!/usr/bin/env bash
# GPU call 3: run2's A/B again (cubin_ab.py's blocks= field fixed): d64 dense default against
# 192x128 with 2 and 3 stages and with Q never from the producer, one process each, 1 round.
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run3; mkdir -p $r
timeout 280 python3 $PWD/bench/results/2026-12-04-h200-s22/cubin_ab.py --d 64 default b128:blocks=192x128 b128s3:blocks=192x128,num_stages=3 b128no:blocks=192x128,never_once=True --rounds 1 --json $r/d64_ab.json 2>&1 | tee $r/d64_ab.log
tar -C $OUT -czf $OUT/run3.tgz run3
