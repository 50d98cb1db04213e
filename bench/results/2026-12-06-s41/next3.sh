#!/usr/bin/env bash
# For a later call (one H100/H200): head dim 192 as it is in the backward (backward.
# NATIVE_BACKWARD_HEAD_DIMS, empty until this passes): test_native_head_dim_192_backward (36
# cases against float64 autograd), then its speed beside the padded route (what tessel.attention
# with gradients does today), FA2 and cuDNN. Where right and faster:
# NATIVE_BACKWARD_HEAD_DIMS = {"sm_90a": (192,)} (docs/dev/backward.md, "Head dim 192 as it is").
# Then attention_varlen at d192 as it is (VARLEN_NATIVE_HEAD_DIMS; where right and faster, on)
# and with v of its own head dim (VARLEN_VALUE_HEAD_DIM_KERNEL; where right, on).
set -u
cd "$(dirname "$0")/../../.."
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/next3; mkdir -p $r
timeout 200 python3 -m pytest -q -p no:cacheprovider test/gpu/test_attention_backward_gpu.py \
  -k "native_head_dim_192_backward" 2>&1 | tail -15 | tee $r/check.log
cd test/gpu
for flag in "" --native-192; do
  timeout 90 python3 bench_backward.py --dims 192 --lengths 4096 16384 $flag \
    --json $r/bwd192$flag.json 2>&1 | tail -6 | tee -a $r/speed.log
done
# attention_varlen at d192 as it is (VARLEN_NATIVE_HEAD_DIMS) and v of its own head dim through
# its DV (VARLEN_VALUE_HEAD_DIM_KERNEL): checks, then d192 speed
cd ../..
timeout 100 python3 -m pytest -q -p no:cacheprovider test/gpu/test_serving_gpu.py \
  -k "varlen_native_192 or varlen_value_head_dim_kernel" 2>&1 | tail -6 | tee $r/varlen192.log
cd test/gpu
for flag in "" --native; do
  timeout 50 python3 bench_varlen.py --d 192 --h 10 --hkv 10 $flag 2>&1 | tail -4 \
    | tee -a $r/varlen192_speed.log
done
