#!/usr/bin/env bash
# Run in the twenty-sixth session once a machine was lent (the second call): the pipelined
# schedules' checks with their tolerance (now1 found them 1 ulp off the default on ~0.03 % of
# elements), then one round of each A/B — pipelining with Q from the producer on both sides
# (dense d128 and d64), late_p against the default d64 kernel, FP8 with and without its
# consumers overlapped (bench_fp8.py, 4k and 16k).
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/now2; mkdir -p $r
cd test/gpu
timeout 110 python3 -m pytest -q -p no:cacheprovider test_persistent_gpu.py -k pipeline -rf --tb=line 2>&1 | tail -12 | tee $r/pipeline_bits.log
timeout 200 python3 ab_gpu_options.py $r/pipe --set producer_once=True --set pipeline_tiles=True \
    --base producer_once=True --cases dense d64 --rounds 1 --timeout 95 2>&1 | tail -14 | tee $r/pipe.log
timeout 110 python3 ab_gpu_options.py $r/late --set late_p=True --set tma_producer=False \
    --cases d64 --rounds 1 --timeout 52 2>&1 | tail -8 | tee $r/late.log
timeout 70 python3 bench_fp8.py --lengths 4096 16384 --json $r/fp8-sync.json 2>&1 | tail -6 | tee $r/fp8-sync.log
timeout 70 python3 bench_fp8.py --lengths 4096 16384 --set fp8_overlap=True --json $r/fp8-over.json 2>&1 | tail -6 | tee $r/fp8-over.log
tar -C $OUT -czf $OUT/now2.tgz now2
