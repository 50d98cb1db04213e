#!/usr/bin/env bash
# s42 call E (one H100): caches of head dims the fast paths do not take read in blocks of the
# next one (serving_checks.KVCACHE_BLOCK_HEAD_DIM): test_kvcache_block_head_dim against float64,
# then decode's speed at d96 and d192 without (the reference lowering's blocks) and with it.
set -u
cd "$(dirname "$0")/../../.."
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/callE; mkdir -p $r
timeout 220 python3 -m pytest -q -p no:cacheprovider --tb=short test/gpu/test_serving_gpu.py \
  -k "kvcache_block_head_dim" > $r/check.log 2>&1; tail -30 $r/check.log
cd test/gpu
for d in 96 192; do
  timeout 100 python3 bench_decode.py --dim $d --heads 32 --kv-heads 8 --nk 1024 8192 65536 \
    --splits 4 --block-head-dim --json $r/decode$d.json 2>&1 | tail -9 | tee $r/decode$d.log
done
