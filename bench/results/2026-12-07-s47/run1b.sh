#!/usr/bin/env bash
# Forty-seventh session, the device time left after failed starts: run1.sh's correctness
# cases only (no regression pass of the cache kernel, no speed).
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run1b; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
timeout 200 python3 -m pytest -q test_serving_gpu.py \
  -k "kvcache_append or kvcache_rotary or batch_index_leftpad or varlen_paged" \
  > $r/new.log 2>&1
tail -3 $r/new.log
timeout 45 python3 -m pytest -q test_serving_gpu.py -k "flash_arguments and varlen_programs" \
  > $r/flash.log 2>&1
tail -3 $r/flash.log
