#!/usr/bin/env bash
# For a later call (one H100/H200): head dim 192 as it is on sm_90a (attention.NATIVE_HEAD_DIMS,
# off): its check against float32 (24 cases) with v's own head dim (Ev != E, padded: 12
# cases with gradients), then its speed beside the padded call, cuDNN and
# FA2 (bench_head_dims.py --ab-native: the "native" cell), fp16 and bf16. If both pass and it is
# faster, NATIVE_HEAD_DIMS = {"sm_90a": (192,)} (docs/dev/codegen-wgmma.md).
set -u
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/native192; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
timeout 240 python3 -m pytest -q -p no:cacheprovider test/gpu/test_python_gpu.py \
  -k "native_head_dim_192 or value_head_dim" 2>&1 | tail -15 | tee $r/check.log
cd test/gpu
for dt in fp16 bf16; do
  timeout 150 python3 bench_head_dims.py --dims 192 --lengths 4096 16384 --dtype $dt --ab-native \
    --json $r/d192_$dt.json 2>&1 | tail -6 | tee -a $r/speed.log
done
