#!/usr/bin/env bash
# Forty-fifth session, third call (what the device time left allows): the CUDA fuzzer's
# forward and block-mask cases after the _and_causal mend and with the causal classification's
# stop at the diagonal (blocksparse.CAUSAL_CLASSIFICATION on: if they pass, make it the
# default); tessel.block_mask at 128k (create_block_mask ran out of memory there in run1);
# serving_checks.VARLEN_BLOCK_HEAD_DIM_GRAD's speed (its check passed in run1: 8/8),
# bench_varlen.py --backward at d96, off then on, one process each.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run3; mkdir -p $r
timeout 80 python3 -c "
import runpy, sys
from tessel import blocksparse
blocksparse.CAUSAL_CLASSIFICATION = True          # off until this check
sys.argv = ['fuzz_differential.py', '--device', 'cuda', '--kinds', 'forward', 'block_mask',
            '--seconds', '55', '--seed', '4505']
runpy.run_path('scripts/fuzz_differential.py', run_name='__main__')
" > $r/fuzz_cuda.log 2>&1; tail -4 $r/fuzz_cuda.log
timeout 50 python3 bench/results/2026-12-06-s45/block_mask_long.py 131072 \
  > $r/block_mask_long.log 2>&1; tail -4 $r/block_mask_long.log
cd test/gpu
for on in False True; do
  timeout 80 python3 -c "
import sys
sys.argv = ['bench_varlen.py', '--backward', '--d', '96', '--h', '16', '--hkv', '16']
from tessel import serving_checks
serving_checks.VARLEN_BLOCK_HEAD_DIM_GRAD = $on
import runpy
runpy.run_path('bench_varlen.py', run_name='__main__')
" > $r/varlen_bwd96_$on.log 2>&1; tail -6 $r/varlen_bwd96_$on.log
done
