#!/usr/bin/env bash
# Forty-fifth session, second call: test_block_mask_gpu.py whole on the checkout (the block-mask
# cache needs the very tensors, a block mask whose tensors changed is refused: both came after
# s44's GPU calls), then the CUDA fuzzer for 200 s.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run2; mkdir -p $r
timeout 300 python3 -m pytest -q -p no:cacheprovider --tb=short \
  test/gpu/test_block_mask_gpu.py > $r/block_mask_gpu.log 2>&1; tail -6 $r/block_mask_gpu.log
# The CUDA fuzzer (every entry point on random shapes against float64) for what is left.
timeout 240 python3 scripts/fuzz_differential.py --device cuda --seconds 200 --seed 4503 \
  > $r/fuzz_cuda.log 2>&1; tail -4 $r/fuzz_cuda.log
