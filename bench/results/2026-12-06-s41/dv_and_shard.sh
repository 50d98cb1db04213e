#!/usr/bin/env bash
# s41: why the DV kernel (attention.VALUE_HEAD_DIM_KERNEL) failed all 40 cases in s41's first
# call, and which backward tests of shards 0 and 3 of 4 hung past 490 s.
set -u
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/s41; mkdir -p $r
timeout 90 python3 -m pytest -q -x -p no:cacheprovider test/gpu/test_python_gpu.py \
  -k "value_head_dim_kernel and full-128-64" --tb=long 2>&1 | tail -60 > $r/dv.log
tail -40 $r/dv.log
TESSEL_GPU_SHARD=0/4 timeout 400 python3 -m pytest -v --durations=15 -p no:cacheprovider \
  test/gpu/test_attention_backward_gpu.py > $r/shard0.log 2>&1
tail -5 $r/shard0.log
