#!/usr/bin/env bash
# GPU call 5: the drain of an empty loop pair skipped (no P·V of P = 0 a tile): correctness of
# the forward kernels, then old (cubins of d255e9e's PTX) against new, Q from the producer
# everywhere and nowhere.
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run5; mkdir -p $r; s=$PWD/bench/results/2026-12-04-h200-s22; c=$s/cubins
(cd test/gpu && timeout 120 python3 check_warp_specialize.py 2>&1 | tail -3 > $r/check_ws.log
 timeout 150 python3 -m pytest -q -p no:cacheprovider test_persistent_gpu.py 2>&1 | tail -3 > $r/persistent.log
 timeout 120 python3 -m pytest -q -p no:cacheprovider test_block_mask_gpu.py 2>&1 | tail -3 > $r/block_mask.log)
cat $r/*.log
timeout 330 python3 $s/cubin_ab.py \
  oldonce:once=True:$c/once_f.cubin,$c/once_c.cubin newonce:once=True \
  oldplain:never_once=True:$c/plain_f.cubin,$c/plain_c.cubin newplain:never_once=True \
  --rounds 2 --json $r/cubin_ab.json 2>&1 | tee $r/cubin_ab.log
tar -C $OUT -czf $OUT/run5.tgz run5
