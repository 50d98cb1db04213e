#!/usr/bin/env bash
# The second bundle (this session's C++: tile-floor-quotient-ranges): the CPU suites on the GPU
# host's Python 3.12 / torch 2.11, the chunk GPU tests, and chunked attention's speed.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run2; mkdir -p $r
export TESSEL_CACHE_DIR=$(mktemp -d)
timeout 200 python3 -m pytest -q -p no:logging -n 8 test/python/test_torch_compile.py \
  test/python/test_mod_closures.py test/python/test_flash.py test/python/test_dsl_globals.py \
  test/python/test_chunked_masks.py > $r/cpu.log 2>&1; tail -12 $r/cpu.log | grep -v "^  "
cd test/gpu
timeout 150 python3 -m pytest -q -p no:logging -n 4 test_flash_gpu.py -k chunk > $r/chunk.log 2>&1
tail -2 $r/chunk.log
timeout 150 python3 ../../bench/results/2026-12-07-s53/chunk_bench.py 16384 2>&1 | tee $r/bench.log
