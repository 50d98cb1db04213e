#!/usr/bin/env bash
# For the next session (one call, the s43 bundle is current: Python-only changes since):
# serving_checks.VARLEN_BLOCK_HEAD_DIM_GRAD's check (attention_varlen with gradients at d96/d80
# through the varlen kernel's and the block-sparse backward's DB; if it passes, turn it on in
# serving_checks.py and test_gpu_dispatch.py `test_varlen_pads_inside_the_kernel`), its speed
# (bench_varlen.py --backward at d96, off then on), then test_persistent_gpu.py whole.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/next1; mkdir -p $r
timeout 150 python3 -m pytest -q -p no:cacheprovider --tb=short test/gpu/test_serving_gpu.py \
  -k "varlen_block_head_dim_gradients or test_varlen_backward" > $r/varlen_grad.log 2>&1
tail -6 $r/varlen_grad.log
cd test/gpu
for on in False True; do
  timeout 90 python3 -c "
import sys
sys.argv = ['bench_varlen.py', '--backward', '--d', '96', '--h', '16', '--hkv', '16']
from tessel import serving_checks
serving_checks.VARLEN_BLOCK_HEAD_DIM_GRAD = $on
import runpy
runpy.run_path('bench_varlen.py', run_name='__main__')
" > $r/varlen_bwd96_$on.log 2>&1; tail -8 $r/varlen_bwd96_$on.log
done
cd ../..
TESSEL_GPU_CHECK_SHARDS=3 TESSEL_GPU_CHECK_JOBS=6 TESSEL_GPU_CHECK_ONLY="persistent_gpu" \
  timeout 300 bash scripts/gpu-check.sh > $r/persistent_gpu.log 2>&1
grep -E "passed|failed" $r/persistent_gpu.log | tail -5
