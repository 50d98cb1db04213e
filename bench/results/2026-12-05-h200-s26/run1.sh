#!/usr/bin/env bash
# Written in the twenty-sixth session (no device machine): GpuOptions(pipeline_tiles), the next
# tile's first S issued before this tile's epilogue (tilegpu-pipeline-tiles, off by default).
# One device call (< 600 s): its bits against the default, and late_p's output against it
# within a few fp16 ulps (the overlap rounds O's rescale otherwise) (test_persistent_gpu.py
# -k "pipeline or d64_schedules": dense d128 and block masks through SCHEDULES, d64's 192-row
# kernel through D64_SCHEDULES), then pipelining's speed
# in alternating processes (ab_gpu_options.py, two rounds) with Q from the producer on both
# sides (the pass needs it; by default only short tiles take it, grid.short_tiles), so that
# every persistent cell — d128 1k-16k, d64 4k-16k (1k runs 64x128, one program a tile) — says
# what pipelining alone is worth. If the bits hold and the cells gain, pipeline_tiles becomes
# the default where producer_once is (docs/dev/codegen-wgmma.md, "Persistent kernels"), and
# the short-tiles threshold is worth measuring again with it.
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run1; mkdir -p $r
cd test/gpu
timeout 170 python3 -m pytest -q -p no:cacheprovider test_persistent_gpu.py -k "pipeline or d64_schedules" 2>&1 | tail -8 | tee $r/bits.log
timeout 420 python3 ab_gpu_options.py $r/ab --set producer_once=True --set pipeline_tiles=True \
    --base producer_once=True --cases dense d64 --rounds 2 --timeout 100 2>&1 | tail -16 | tee $r/ab.log
tar -C $OUT -czf $OUT/run1.tgz run1
