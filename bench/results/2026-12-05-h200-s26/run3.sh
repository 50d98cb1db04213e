#!/usr/bin/env bash
# Written in the twenty-sixth session (no device machine): GpuOptions(fp8_overlap) — the FP8
# d128 kernels' consumers overlapped as fp16's are (S_j issued beside the previous P·V, the
# softmax under it), their transposed V read so by the P·V; FP8 ran synchronous consumers
# because the overlap pass only took V read as stored. One device call (< 600 s): the float64
# checks with it (test_fp8_gpu.py -k overlapped: persistent and one program a tile, GQA, ragged
# lengths), then bench_fp8.py without and with it in alternating processes, two rounds. If it
# holds and wins: grid.FP8_OVERLAP_GPU = True (docs/dev/fp8.md).
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run3; mkdir -p $r
cd test/gpu
timeout 150 python3 -m pytest -q -p no:cacheprovider test_fp8_gpu.py -k overlapped 2>&1 | tail -6 | tee $r/bits.log
for round in 1 2; do
  timeout 100 python3 bench_fp8.py --lengths 1024 4096 16384 --json $r/sync-$round.json 2>&1 | tail -8 | tee $r/sync-$round.log
  timeout 100 python3 bench_fp8.py --lengths 1024 4096 16384 --set fp8_overlap=True --json $r/over-$round.json 2>&1 | tail -8 | tee $r/over-$round.log
done
tar -C $OUT -czf $OUT/run3.tgz run3
