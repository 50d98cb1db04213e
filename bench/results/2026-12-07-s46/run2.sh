#!/usr/bin/env bash
# Forty-sixth session: attention_varlen's gradients by the varlen programs
# (varlen_backward.NATIVE_CHIPS) — their GPU tests against float64, then forward + backward
# beside nested SDPA with them off and on (bench_varlen.py --backward, one process each), d128
# and d96; on an H200, then issue 16's fp16 sweep (run1.sh's first half).
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run2; mkdir -p $r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.limit --format=csv \
  | tee $r/gpu.txt
cd test/gpu
timeout 240 python3 -m pytest -q test_serving_gpu.py -k "varlen_programs or varlen_backward" \
  > $r/tests.log 2>&1; tail -5 $r/tests.log
for d in 128 96; do
  for on in False True; do
    timeout 70 python3 -c "
import sys, runpy
sys.argv = ['bench_varlen.py', '--backward', '--d', '$d', '--h', '16', '--hkv', '16']
from tessel import varlen_backward as vb
vb.NATIVE_CHIPS = ('sm_90a',) if $on else ()
runpy.run_path('bench_varlen.py', run_name='__main__')
" > $r/varlen_bwd${d}_$on.log 2>&1; echo "d$d native=$on"; grep -E "^ *(True|False) " $r/varlen_bwd${d}_$on.log
  done
done
if grep -q H200 $r/gpu.txt; then
  timeout 200 python3 bench_head_dims.py --dims 64 128 256 --lengths 1024 4096 16384 \
    --dtype fp16 --json $r/dims_fp16.json 2>&1 | tail -22 | tee $r/dims_fp16.log
fi
