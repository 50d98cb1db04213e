#!/usr/bin/env bash
# GPU call 6: d256 now keeps the overlapped consumers (its overlapped kernel no longer spills
# without the drain's select): correctness, then against the schedule it had (no overlap, no
# turns).
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run6; mkdir -p $r; s=$PWD/bench/results/2026-12-04-h200-s22
(cd test/gpu && timeout 100 python3 check_warp_specialize.py 2>&1 | tail -40 > $r/check_ws.log)
tail -2 $r/check_ws.log
timeout 200 python3 $s/cubin_ab.py --d 256 new old:overlap_consumers=False,pingpong=False \
  --rounds 2 --json $r/d256_ab.json 2>&1 | tee $r/d256_ab.log
tar -C $OUT -czf $OUT/run6.tgz run6
