#!/usr/bin/env bash
# For the next session's first call (one 590 s call): the backward suite, which did not finish
# inside s38's third call, on the current main (it has not run whole since s35's varlen
# backward and s37/s38's forward changes; the backward's own programs are not warp-specialized,
# so s37's Q rule does not reach them).
cd "$(dirname "$0")/../../.."
TESSEL_GPU_CHECK_PLOTS=0 TESSEL_GPU_CHECK_ONLY="backward_gpu" timeout 580 bash scripts/gpu-check.sh
