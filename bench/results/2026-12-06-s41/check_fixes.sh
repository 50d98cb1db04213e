#!/usr/bin/env bash
# s41, second machine: the two fixes of the session on the GPU — the DV kernel's first launch
# (test_value_head_dim_kernel, 40 cases against float32, all wrong before) and the occupancy
# hint kept off warp-specialised kernels (the backward's switch cases that hung, with the rest
# of shards 0 and 3 of s41's four-shard run) — then head dim 192's cases on the new default
# (NATIVE_HEAD_DIMS on) and v's own head dim in speed (padded / d192 native / DV).
set -u
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/s41b; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
timeout 100 python3 -m pytest -q -p no:cacheprovider test/gpu/test_python_gpu.py \
  -k "value_head_dim_kernel" 2>&1 | tail -4 | tee $r/dv.log
timeout 200 python3 -m pytest -q -p no:cacheprovider test/gpu/test_attention_backward_gpu.py \
  -k "switches or even_causal or fused_dq" --durations=5 2>&1 | tail -10 | tee $r/backward.log
timeout 80 python3 -m pytest -q -p no:cacheprovider test/gpu/test_python_gpu.py \
  -k "192 and not value_head_dim_kernel" 2>&1 | tail -4 | tee $r/d192.log
cd test/gpu
timeout 100 python3 bench_value_head_dim.py 2>&1 | tail -12 | tee $r/speed.log
