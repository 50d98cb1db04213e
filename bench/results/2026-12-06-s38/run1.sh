#!/usr/bin/env bash
# Thirty-eighth session, first call: the FP8 suite (the s37 fix to Q's A fragments in the
# synchronous one-loop consumers, never run on a GPU), then the whole persistent suite.
cd "$(dirname "$0")/../../.."
TESSEL_GPU_CHECK_PLOTS=0 TESSEL_GPU_CHECK_ONLY="fp8_gpu persistent_gpu" timeout 580 bash scripts/gpu-check.sh
