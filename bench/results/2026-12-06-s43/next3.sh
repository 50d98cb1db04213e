#!/usr/bin/env bash
# Forty-third session, after the mend (tilegpu's plan reads Q by descriptor where one loop reads
# it beside a P of its width: LoadSlot::byDescriptor) and the flips (trim_zero_columns on, the
# forward's and backward's BLOCK_HEAD_DIM_CHIPS = sm_90a). Needs a bundle built after them.
# even64.py (every case right now), the asked-for blocks against float32, the head-dim suites
# on the new defaults, the CUDA fuzzer on the seed that failed, d96's speed.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/next3; mkdir -p $r
timeout 60 python3 bench/results/2026-12-06-s43/even64.py 2>&1 | grep -v "^tessel: comp" | tee $r/even64.log
timeout 200 python3 -m pytest -q -p no:cacheprovider --tb=short test/gpu/test_python_gpu.py \
  test/gpu/test_attention_backward_gpu.py -k "asked_for_blocks or block_head_dim or padded_head_dims or other_head_dims" \
  > $r/check.log 2>&1; tail -12 $r/check.log
timeout 100 python3 scripts/fuzz_differential.py --device cuda --seconds 80 --seed 42 \
  --kinds forward serving backward 2>&1 | grep -v "^tessel: comp" | tail -6 | tee $r/fuzz42.log
cd test/gpu
timeout 60 python3 bench_head_dims.py --dims 96 --lengths 1024 4096 16384 --json $r/dims.json \
  2>&1 | tail -8 | tee $r/dims.log
