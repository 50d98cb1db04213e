#!/usr/bin/env bash
# Forty-seventh session, first call (any one GPU): s46's run4 (attention_with_kvcache's k=/v=
# append and rotary; the varlen programs with window/cap/ALiBi) and this session's
# cache_batch_idx / cache_leftpad cases.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run1; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
timeout 240 python3 -m pytest -q test_serving_gpu.py \
  -k "kvcache_append or kvcache_rotary or batch_index_leftpad" > $r/kvcache.log 2>&1
tail -3 $r/kvcache.log
timeout 240 python3 -m pytest -q test_serving_gpu.py -k "flash_arguments and varlen_programs" \
  > $r/flash.log 2>&1
tail -3 $r/flash.log
