#!/usr/bin/env bash
# The fifty-fourth session's first call: the checks of causal query blocks aligned to the last
# row (attention.ALIGN_QUERY_BLOCKS_TO_END) and of attention_chunk's mask_mod route, then their
# speed (align_bench.py beside cuDNN; chunk_routes.py). On an H200 issue 16's sweep first.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run1; mkdir -p $r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.limit --format=csv \
  | tee $r/gpu.txt
export TESSEL_CACHE_DIR=$(mktemp -d)
s=$PWD/bench/results/2026-12-07-s54
cd test/gpu
junit() { python3 ../../scripts/junit_summary.py $1 2>&1 | tail -3; }
if grep -q H200 $r/gpu.txt; then
  for dt in fp16 bf16; do
    timeout 130 python3 bench_head_dims.py --dims 64 128 256 --lengths 4096 16384 --rounds 2 \
      --dtype $dt --json $r/dims_$dt.json 2>&1 | tail -14 | tee $r/dims_$dt.log
  done
fi
timeout 150 python3 -m pytest -q -p no:logging -n 8 test_persistent_gpu.py test_flash_gpu.py \
  -k "align or chunk or seqused" --junitxml $r/checks.xml > $r/checks.log 2>&1; tail -2 $r/checks.log
junit $r/checks.xml
timeout 120 python3 $s/align_bench.py --rounds 2 2>&1 | tee $r/align.log
timeout 120 python3 $s/chunk_routes.py 16384 2>&1 | tee $r/chunk.log
