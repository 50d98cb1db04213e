#!/usr/bin/env bash
# GPU call 4: the TMA producer with Q from the producer, overlapped and synchronous consumers,
# as compiled and with the consumers' proxy fences deleted (TMA writes through the async proxy).
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run4; mkdir -p $r; s=bench/results/2026-12-04-h200-s22; c=$s/cubins
timeout 540 python3 $s/cubin_ab.py default \
  tmaonce:tma_producer=True,once=True \
  tmaoncenf:tma_producer=True,once=True:$c/tmaoncenf_f.cubin,$c/tmaoncenf_c.cubin \
  tmasynconce:tma_producer=True,overlap_consumers=False,once=True \
  tmasynconcenf:tma_producer=True,overlap_consumers=False,once=True:$c/tmasynconcenf_f.cubin,$c/tmasynconcenf_c.cubin \
  --rounds 2 --json $r/cubin_ab.json 2>&1 | tee $r/cubin_ab.log
tar -C $OUT -czf $OUT/run4.tgz run4
