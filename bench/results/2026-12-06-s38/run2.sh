#!/usr/bin/env bash
# Thirty-eighth session, second call: issue 16's sweep beside cuDNN and FA2, fp16 (bf16 where
# time is left), with s37's changes (Q by descriptor in the synchronous one-loop consumers,
# which d64's 192x128 kernel from 2k keys is, and drop_tma_fences on).
set -u
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/run2; mkdir -p $r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.limit --format=csv | tee $r/gpu.txt
cd test/gpu
for dt in fp16 bf16; do
  timeout 270 python3 bench_head_dims.py --dims 64 128 256 --lengths 1024 4096 16384 --dtype $dt \
    --json $r/dims_$dt.json 2>&1 | tail -22 | tee $r/dims_$dt.log
done
