#!/usr/bin/env bash
# Written in the twenty-sixth session (no device machine): GpuOptions(late_p), FA3's d64
# schedule for the 192x128 kernel — its three consumer warpgroups overlapped (S_j under the
# previous P·V) with P_j made after that P·V's wait, at 160 registers beside a cp.async producer
# of 32 — against the default (synchronous consumers at 152 beside a 56-register TMA
# producer). One device call (< 600 s; run1 checks its bits first): ab_gpu_options.py on the
# d64 cells, two rounds; then all of the session's schedules together (late_p, pipelining, Q
# from the producer) against Q from the producer alone. d64 1k runs 64x128 (one program a
# tile): the control. If late_p wins at 4k-16k, it becomes the d64 default (the TMA
# producer steps aside there: tilegpu-tma-producer before overlap-consumers).
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run2; mkdir -p $r
cd test/gpu
timeout 280 python3 ab_gpu_options.py $r/late --set late_p=True --set tma_producer=False \
    --cases d64 --rounds 2 --timeout 65 2>&1 | tail -8 | tee $r/late.log
timeout 280 python3 ab_gpu_options.py $r/late_pipe --set late_p=True --set tma_producer=False \
    --set producer_once=True --set pipeline_tiles=True --base producer_once=True \
    --cases d64 --rounds 2 --timeout 65 2>&1 | tail -8 | tee $r/late_pipe.log
tar -C $OUT -czf $OUT/run2.tgz run2
