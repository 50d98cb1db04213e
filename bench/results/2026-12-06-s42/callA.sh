#!/usr/bin/env bash
# s42 call A (one H100): s41's next1 first half (d192 native and DV on [B, N, H, D] views,
# attention.NATIVE_STRIDED) and s41's next2 (the KV cache at head dim 256 and decode's speed).
set -u
cd "$(dirname "$0")/../../.."
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/callA; mkdir -p $r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv | tee $r/gpu.txt
timeout 150 python3 -m pytest -q -p no:cacheprovider --tb=short test/gpu/test_python_gpu.py \
  -k "native_strided_views" > $r/strided.log 2>&1; tail -40 $r/strided.log
timeout 200 python3 -m pytest -q -p no:cacheprovider --tb=short test/gpu/test_serving_gpu.py \
  -k "kvcache_at_head_dim_256" > $r/kv256.log 2>&1; tail -40 $r/kv256.log
cd test/gpu
timeout 200 python3 bench_decode.py --dim 256 --heads 16 --kv-heads 8 --nk 1024 8192 65536 \
  --splits 4 16 --json $r/decode256.json 2>&1 | tail -20 | tee $r/decode256.log
