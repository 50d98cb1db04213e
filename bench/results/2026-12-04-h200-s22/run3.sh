#!/usr/bin/env bash
# GPU call 3: per-tile cost — Q from the producer at every length, without the consumers'
# barrier at each tile start (edited cubins), and the synchronous schedule with Q from the
# producer; then the serving tests.
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run3; mkdir -p $r; s=bench/results/2026-12-04-h200-s22
timeout 330 python3 $s/cubin_ab.py default once:once=True \
  nobar:once=True:$s/cubins/nobar_f.cubin,$s/cubins/nobar_c.cubin \
  synconce:overlap_consumers=False,once=True --rounds 2 --json $r/once_ab.json 2>&1 | tee $r/once_ab.log
(cd test/gpu && timeout 220 python3 -m pytest -q -x -p no:cacheprovider test_serving_gpu.py 2>&1 | tail -5 > $r/serving.log)
tar -C $OUT -czf $OUT/run3.tgz run3
cat $r/serving.log
