#!/usr/bin/env bash
# Written in the twenty-sixth session (no device machine): GpuOptions(late_p), FA3's d64
# schedule for the 192x128 kernel — its three consumer warpgroups overlapped (S_j under the
# previous P·V) with P_j made after that P·V's wait, at 160 registers beside a cp.async producer
# of 32 — against the default (synchronous consumers at 152 beside a 56-register TMA
# producer). One device call (< 600 s; run1 checks its bits first): ab_gpu_options.py on the
# d64 cells, two rounds; then tessel.attention's policy with both switched on
# (grid.PIPELINE_TILES_GPU: pipelined tiles where Q comes from the producer; grid.LATE_P_GPU:
# FA3's d64 schedule for the 192-row kernel) against today's, on every case. d64 1k runs
# 64x128 (one program a tile): the control. Where a switch wins, it becomes the default
# (grid.PIPELINE_TILES_GPU / grid.LATE_P_GPU = True; docs/dev/codegen-wgmma.md).
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run2; mkdir -p $r
cd test/gpu
timeout 280 python3 ab_gpu_options.py $r/late --set late_p=True --set tma_producer=False \
    --cases d64 --rounds 2 --timeout 65 2>&1 | tail -8 | tee $r/late.log
timeout 320 python3 ab_gpu_options.py $r/policy --grid PIPELINE_TILES_GPU=True \
    --grid LATE_P_GPU=True --cases dense d64 masks --rounds 2 --timeout 75 2>&1 | tail -20 \
    | tee $r/policy.log
tar -C $OUT -czf $OUT/run2.tgz run2
