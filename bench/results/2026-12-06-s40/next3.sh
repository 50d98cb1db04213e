#!/usr/bin/env bash
# The backward suite whole in one call: four shards side by side (TESSEL_GPU_CHECK_SHARDS with
# TESSEL_GPU_CHECK_JOBS; the suite's time is its first compiles, which take the host's 16
# cores, not the GPU). In s40 one process ran 94 of ~100 tests of a half in 580 s. If this
# call runs out of time, the cut-off logs show how far each shard got; then run
# `bash next3.sh 0|1|2` (one shard of three a call, one process).
set -u
cd "$(dirname "$0")/../../.."
if [ $# -ge 1 ]; then
  TESSEL_GPU_SHARD="$1/3" TESSEL_GPU_CHECK_PLOTS=0 TESSEL_GPU_CHECK_ONLY=backward_gpu \
    timeout 580 bash scripts/gpu-check.sh 2>&1 | tail -30
  exit
fi
TESSEL_GPU_CHECK_SHARDS=4 TESSEL_GPU_CHECK_JOBS=4 TESSEL_GPU_CHECK_PLOTS=0 \
  TESSEL_GPU_CHECK_ONLY=backward_gpu timeout 580 bash scripts/gpu-check.sh 2>&1 | tail -40
