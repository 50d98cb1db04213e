#!/usr/bin/env bash
# s42 call F (one H100): attention_varlen at head dims it pads (96, 80, 40, 160) through the
# varlen kernel's DB (serving_checks.VARLEN_BLOCK_HEAD_DIM) against float64, then d96 and d80
# speed padded on the host (today's default) and padded inside the kernel.
set -u
cd "$(dirname "$0")/../../.."
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/callF; mkdir -p $r
timeout 200 python3 -m pytest -q -p no:cacheprovider --tb=short test/gpu/test_serving_gpu.py \
  -k "varlen_block_head_dim" > $r/check.log 2>&1; tail -30 $r/check.log
cd test/gpu
for d in 96 80; do
  for flag in "" --block-head-dim; do
    timeout 60 python3 bench_varlen.py --d $d --h 16 --hkv 16 $flag 2>&1 | grep -v Warn \
      | grep -v fx_tracing | tail -3 | tee -a $r/varlen$d.log
  done
done
