#!/usr/bin/env bash
# Twenty-seventh session: GpuOptions(fuse_masked_loops) — speed and cold compile. The cold
# compile on this host without and with it (the < 1 s bar at d128 128x128), then
# ab_gpu_options.py (dense d128 and d64, three block masks; A with the switch, B the default;
# alternating processes), then d256 and the backward at d128 without and with it
# (TESSEL_TEST_GPU_OPTIONS), one process each.
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$w/run4; mkdir -p $r   # all under the tgz; the logs also in $OUT
for s in fuse_masked_loops=False fuse_masked_loops=True; do
  timeout 40 python3 scripts/bench_cold_compile.py --runs 3 --dims 128 --kinds full,long --set $s \
    --build $w 2>&1 | grep -E "^d|ptxas  |nvptx|llvm|binary|first_call" | sed "s/^/$s /" | tee -a $r/cold_compile.log
done
cd test/gpu
timeout 330 python3 ab_gpu_options.py $r/ab --set fuse_masked_loops=True --cases dense d64 masks \
  --rounds 1 2>&1 | tail -24 | tee $r/ab.log
for s in False True; do
  TESSEL_TEST_GPU_OPTIONS=fuse_masked_loops=$s timeout 60 python3 bench_head_dims.py --dims 256 \
    --json $r/d256_$s.json 2>&1 | tail -5 | tee -a $r/d256.log
done
for s in False True; do
  TESSEL_TEST_GPU_OPTIONS=fuse_masked_loops=$s timeout 60 python3 bench_backward.py --dims 128 \
    --lengths 4096 16384 --json $r/bwd_$s.json 2>&1 | tail -5 | tee -a $r/bwd.log
done
tar -C $w -czf $OUT/run4.tgz run4; cp $r/*.log $OUT/
