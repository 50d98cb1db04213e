#!/usr/bin/env bash
# Forty-fourth session, second call: masks at head dim 96 beside FlexAttention, padded copies
# (attention.BLOCK_HEAD_DIM_MASKS and BLOCK_HEAD_DIM_SPARSE off) then inside the kernels (both
# on), one process each; then test_block_mask_gpu.py whole on the checkout's defaults (both on).
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run2; mkdir -p $r
for on in False True; do
  timeout 150 python3 -c "
import importlib, sys
sys.path.insert(0, 'test/gpu')
a = importlib.import_module('tessel.attention')
a.BLOCK_HEAD_DIM_MASKS = a.BLOCK_HEAD_DIM_SPARSE = $on
import bench_block_mask
sys.argv = ['bench_block_mask.py', '--d', '96', '--json', '$r/masks96_$on.json']
bench_block_mask.main()
" > $r/masks96_$on.log 2>&1; tail -12 $r/masks96_$on.log
done
timeout 200 python3 -m pytest -q -p no:cacheprovider --tb=short \
  test/gpu/test_block_mask_gpu.py > $r/block_mask_gpu.log 2>&1; tail -6 $r/block_mask_gpu.log
