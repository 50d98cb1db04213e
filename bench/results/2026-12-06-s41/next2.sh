#!/usr/bin/env bash
# For a later call (one H100/H200): the KV cache at head dim 256 (Gemma's) on the fast paths —
# test_kvcache_at_head_dim_256 (24 cases against float64, with serving_checks.
# KVCACHE_FAST_HEAD_DIMS = (64, 128, 256) set by the test), then decode's speed at d256:
# bench_decode.py's `tessel 64x64` row is the candidate, `tessel` today's default (the
# reference lowering's blocks), beside cuDNN and FA2. Where right and faster, set
# KVCACHE_FAST_HEAD_DIMS = (64, 128, 256) (docs/dev/serving.md).
set -u
cd "$(dirname "$0")/../../.."
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/next2; mkdir -p $r
timeout 200 python3 -m pytest -q -p no:cacheprovider test/gpu/test_serving_gpu.py \
  -k "kvcache_at_head_dim_256" 2>&1 | tail -15 | tee $r/check.log
cd test/gpu
timeout 200 python3 bench_decode.py --dim 256 --heads 16 --kv-heads 8 --nk 1024 8192 65536 \
  --splits 4 16 --json $r/decode256.json 2>&1 | tail -20 | tee $r/decode256.log
