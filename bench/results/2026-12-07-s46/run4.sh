#!/usr/bin/env bash
# Forty-sixth session, the device time left after run3 (whose pytest ran out of time before
# these): attention_with_kvcache's k=/v= append and rotary cases, then the varlen programs with
# window/cap/ALiBi (varlen_backward.NATIVE_FLASH_MODS: on if they pass).
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run4; mkdir -p $r
cd test/gpu
timeout 300 python3 -m pytest -q test_serving_gpu.py -k "kvcache_append or kvcache_rotary" \
  > $r/kvcache.log 2>&1; tail -3 $r/kvcache.log
timeout 300 python3 -m pytest -q test_serving_gpu.py -k "flash_arguments and varlen_programs" \
  > $r/flash.log 2>&1; tail -3 $r/flash.log
