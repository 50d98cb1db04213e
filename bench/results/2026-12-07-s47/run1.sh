#!/usr/bin/env bash
# Forty-seventh session, first call (any one GPU): s46's run4 (attention_with_kvcache's k=/v=
# append and rotary; the varlen programs with window/cap/ALiBi), this session's
# cache_batch_idx / cache_leftpad and attention_varlen(block_table=) cases, then the cache
# kernel's cases again (its key loop became cache_key_loop).
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run1; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
timeout 170 python3 -m pytest -q test_serving_gpu.py \
  -k "kvcache_append or kvcache_rotary or batch_index_leftpad or varlen_paged" \
  > $r/new.log 2>&1
tail -3 $r/new.log
timeout 50 python3 -m pytest -q test_serving_gpu.py -k "flash_arguments and varlen_programs" \
  > $r/flash.log 2>&1
tail -3 $r/flash.log
timeout 110 python3 -m pytest -q test_serving_gpu.py \
  -k "test_kvcache[ or kvcache_block_head_dim or test_flash_arguments" > $r/kvcache.log 2>&1
tail -3 $r/kvcache.log
# The mixed batch's speed: attention_varlen(block_table=) beside attention_with_kvcache.
timeout 70 python3 bench_varlen_paged.py --keys 4096 16384 --json $r/varlen_paged.json 2>&1 | tail -12 \
  | tee $r/varlen_paged.log
