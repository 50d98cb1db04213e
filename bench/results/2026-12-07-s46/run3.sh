#!/usr/bin/env bash
# Forty-sixth session, after run2: the varlen programs on by default (NATIVE_CHIPS sm_90a) and
# _as_jit taking the serving mods as made — test_serving_gpu.py's varlen cases whole (forward
# and gradients) and the new kvcache append and rotary cases, the CUDA fuzzer's varlen_backward cases.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run3; mkdir -p $r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.limit --format=csv \
  | tee $r/gpu.txt
(cd test/gpu && timeout 230 python3 -m pytest -q test_serving_gpu.py \
  -k "varlen or kvcache_append or kvcache_rotary" > $r/tests.log 2>&1); tail -5 $r/tests.log
timeout 80 python3 scripts/fuzz_differential.py --device cuda --kinds varlen_backward \
  --seconds 50 --seed 4602 > $r/fuzz_cuda.log 2>&1; tail -3 $r/fuzz_cuda.log
