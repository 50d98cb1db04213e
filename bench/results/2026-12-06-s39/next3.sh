#!/usr/bin/env bash
# For later calls: the backward suite whole, in two shards (TESSEL_GPU_SHARD, test/gpu/shard.py;
# this session's call ran 167 of its ~190 tests in 500 s, none failing): `bash next3.sh 0`,
# then `bash next3.sh 1`, a call each.
set -u
cd "$(dirname "$0")/../../.."
TESSEL_GPU_SHARD="$1/2" TESSEL_GPU_CHECK_PLOTS=0 TESSEL_GPU_CHECK_ONLY=backward_gpu \
  timeout 580 bash scripts/gpu-check.sh 2>&1 | tail -30
