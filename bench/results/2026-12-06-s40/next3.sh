#!/usr/bin/env bash
# The backward suite whole, in three shards (two 580 s calls ran 94 and 87 of 100 tests each in
# s40): `bash next3.sh 0`, `bash next3.sh 1`, `bash next3.sh 2`, a call each.
set -u
cd "$(dirname "$0")/../../.."
TESSEL_GPU_SHARD="$1/3" TESSEL_GPU_CHECK_PLOTS=0 TESSEL_GPU_CHECK_ONLY=backward_gpu \
  timeout 580 bash scripts/gpu-check.sh 2>&1 | tail -30
