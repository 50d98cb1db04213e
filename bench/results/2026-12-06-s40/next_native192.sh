#!/usr/bin/env bash
# For a later call (one H100/H200): head dim 192 as it is on sm_90a (attention.NATIVE_HEAD_DIMS,
# off): its check against float32 (24 cases) with v's own head dim (Ev != E, padded: 12
# cases with gradients; the DV kernel: 40) and attention_varlen at head dims 96 and 40 (now
# padded to 128 / 64, 16 cases) and at 256 and 192 on the fast paths (VARLEN_FAST_HEAD_DIMS'
# candidate, 8 cases), then its speed beside the padded call, cuDNN and
# FA2 (bench_head_dims.py --ab-native: the "native" cell), and v's own head dim padded, with d192
# native, and through the DV kernel (bench_value_head_dim.py). Where right and faster:
# NATIVE_HEAD_DIMS = {"sm_90a": (192,)}, VALUE_HEAD_DIM_KERNEL = True (docs/dev/codegen-wgmma.md);
# where right, serving_checks.VARLEN_FAST_HEAD_DIMS = (64, 128, 256) (it replaces the reference
# lowering; bench_varlen.py times it).
set -u
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/native192; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
timeout 270 python3 -m pytest -q -p no:cacheprovider test/gpu/test_python_gpu.py \
  -k "native_head_dim_192 or value_head_dim" 2>&1 | tail -15 | tee $r/check.log
timeout 100 python3 -m pytest -q -p no:cacheprovider test/gpu/test_serving_gpu.py \
  -k "test_varlen and (d96 or d40 or head_dim_256)" 2>&1 | tail -8 | tee $r/varlen_padded.log
cd test/gpu
timeout 80 python3 bench_head_dims.py --dims 192 --lengths 4096 16384 --ab-native \
  --json $r/d192.json 2>&1 | tail -6 | tee -a $r/speed.log
timeout 110 python3 bench_value_head_dim.py 2>&1 | tail -12 | tee -a $r/speed.log
