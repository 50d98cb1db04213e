#!/usr/bin/env bash
# Forty-third session: the backward with blocks of the padded head dim (backward.BLOCK_HEAD_DIM_CHIPS,
# empty until this passes) and attention_backward at padded head dims on padded copies (the
# default now, where it ran the reference lowering before): their GPU checks against float64
# autograd, then with S's and dP's k steps trimmed (trim_zero_columns), then the speed at d96
# beside the copies, FA2 and cuDNN. Needs a bundle with s42's C++ (trim_zero_columns).
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/next2; mkdir -p $r
timeout 200 python3 -m pytest -q -p no:cacheprovider --tb=short test/gpu/test_attention_backward_gpu.py \
  -k "block_head_dim_backward or padded_head_dims" > $r/check.log 2>&1; tail -15 $r/check.log
TESSEL_TEST_GPU_OPTIONS=trim_zero_columns=True timeout 120 python3 -m pytest -q -p no:cacheprovider \
  --tb=short test/gpu/test_attention_backward_gpu.py -k "block_head_dim_backward and f16" \
  > $r/check_trim.log 2>&1; tail -8 $r/check_trim.log
cd test/gpu
timeout 100 python3 bench_backward.py --dims 96 --lengths 4096 16384 --ab-block-head-dim \
  --json $r/bwd96.json 2>&1 | tail -8 | tee $r/bwd96.log
TESSEL_TEST_GPU_OPTIONS=trim_zero_columns=True timeout 100 python3 bench_backward.py --dims 96 \
  --lengths 4096 16384 --ab-block-head-dim --json $r/bwd96_trim.json 2>&1 | tail -8 \
  | tee $r/bwd96_trim.log
