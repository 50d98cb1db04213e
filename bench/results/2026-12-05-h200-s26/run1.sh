#!/usr/bin/env bash
# Written in the twenty-sixth session (no device machine): GpuOptions(pipeline_tiles), the next
# tile's first S issued before this tile's epilogue (tilegpu-pipeline-tiles, off by default).
# One device call (< 600 s): its bits against the default (test_persistent_gpu.py -k
# pipeline: dense d128 and block masks through SCHEDULES, d64's 192-row kernel), then its speed
# against the default in alternating processes (ab_gpu_options.py, two rounds; the cells that
# take Q from the producer can move — d128 1k, 4k causal, d64 2k-4k, the short-row masks —
# 16k is the control). If the bits hold and the cells gain, pipeline_tiles becomes the default
# where producer_once is (docs/dev/codegen-wgmma.md, "Persistent kernels").
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run1; mkdir -p $r
cd test/gpu
timeout 150 python3 -m pytest -q -p no:cacheprovider test_persistent_gpu.py -k pipeline 2>&1 | tail -8 | tee $r/pipeline_bits.log
timeout 420 python3 ab_gpu_options.py $r/ab --set pipeline_tiles=True --cases dense d64 masks --rounds 2 --timeout 100 2>&1 | tail -24 | tee $r/ab.log
tar -C $OUT -czf $OUT/run1.tgz run1
