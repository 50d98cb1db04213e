#!/usr/bin/env bash
# Forty-fifth session, second call: test_persistent_gpu.py whole on the current defaults (s44's
# next1.sh had it; not run since s43's switches), then the CUDA fuzzer (every entry point on
# random shapes against float64) for what is left of the call.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run2; mkdir -p $r
OUT=$r/check TESSEL_GPU_CHECK_SHARDS=3 TESSEL_GPU_CHECK_JOBS=6 \
  TESSEL_GPU_CHECK_ONLY="persistent_gpu" timeout 330 bash scripts/gpu-check.sh > $r/persistent.log 2>&1
grep -E "passed|failed|error" $r/persistent.log | tail -5
timeout 200 python3 scripts/fuzz_differential.py --device cuda --seconds 170 --seed 4503 \
  > $r/fuzz_cuda.log 2>&1; tail -4 $r/fuzz_cuda.log
