#!/usr/bin/env bash
# Forty-fifth session, third call: serving_checks.VARLEN_BLOCK_HEAD_DIM_GRAD's speed (its check
# passed in run1: 8/8) — bench_varlen.py --backward at d96, off then on, one process each;
# tessel.block_mask on long sequences (128k: create_block_mask ran out of memory in run1); the
# CUDA fuzzer's forward and block-mask cases after the _and_causal mend.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run3; mkdir -p $r
cd test/gpu
for on in False True; do
  timeout 90 python3 -c "
import sys
sys.argv = ['bench_varlen.py', '--backward', '--d', '96', '--h', '16', '--hkv', '16']
from tessel import serving_checks
serving_checks.VARLEN_BLOCK_HEAD_DIM_GRAD = $on
import runpy
runpy.run_path('bench_varlen.py', run_name='__main__')
" > $r/varlen_bwd96_$on.log 2>&1; tail -6 $r/varlen_bwd96_$on.log
done
cd ../..
timeout 60 python3 bench/results/2026-12-06-s45/block_mask_long.py 131072 \
  > $r/block_mask_long.log 2>&1; tail -4 $r/block_mask_long.log
timeout 90 python3 scripts/fuzz_differential.py --device cuda --kinds forward block_mask \
  --seconds 60 --seed 4505 > $r/fuzz_cuda.log 2>&1; tail -4 $r/fuzz_cuda.log
