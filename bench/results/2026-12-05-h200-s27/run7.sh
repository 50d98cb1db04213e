#!/usr/bin/env bash
# Written at the end of the twenty-seventh session (no device time left): GpuOptions(
# sync_masked_loops) — the split's masked loops (one or two boundary blocks a tile) left
# synchronous by the overlapped consumers, a quarter less code at d128 (cold compile here
# 1.07-1.18 -> 0.84-0.88 s), expected as fast as the default (an overlapped loop of one or two
# steps is all peel and drain). One call (< 600 s): the persistent schedules against the default
# and float32, the Python suite's attention cases under the switch, the A/B (dense d128/d64,
# masks), the cold compile on the host. If it holds and is not slower: on by default.
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$w/run7; mkdir -p $r
for s in sync_masked_loops=False sync_masked_loops=True; do
  timeout 40 python3 scripts/bench_cold_compile.py --runs 3 --dims 128 --kinds full,long --set $s \
    --build $w 2>&1 | grep -E "^d|ptxas  |binary|first_call" | sed "s/^/$s /" | tee -a $r/cold_compile.log
done
cd test/gpu
timeout 120 python3 -m pytest -q -p no:cacheprovider test_persistent_gpu.py -k "sync and masked" 2>&1 \
  | tail -4 | tee $r/persistent.log
TESSEL_TEST_GPU_OPTIONS=sync_masked_loops=True timeout 150 python3 -m pytest -q -p no:cacheprovider \
  test_python_gpu.py -k "attention or affine or band or mod" 2>&1 | tail -6 | tee $r/python.log
timeout 240 python3 ab_gpu_options.py $r/ab --set sync_masked_loops=True --cases dense d64 masks \
  --rounds 1 2>&1 | tail -18 | tee $r/ab.log
tar -C $w -czf $OUT/run7.tgz run7; cp $r/*.log $OUT/
