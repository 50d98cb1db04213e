#!/usr/bin/env bash
# Thirty-eighth session, third call: more of the GPU check on s37's changes — the DSL on CUDA
# tensors (d64's 192x128 one-loop kernel among them), block masks, the backward, serving.
cd "$(dirname "$0")/../../.."
TESSEL_GPU_CHECK_PLOTS=0 TESSEL_GPU_CHECK_ONLY="python_gpu block_mask_gpu backward_gpu serving_gpu" \
  timeout 580 bash scripts/gpu-check.sh
