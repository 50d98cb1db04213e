#!/usr/bin/env bash
# tessel under torch.compile on the GPU: test/gpu/test_torch_compile_gpu.py (inductor fullgraph
# forward + backward, varlen with gradients, a KV-cache append, CUDA graphs).
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run2; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
timeout 400 python3 -m pytest -q -p no:logging test_torch_compile_gpu.py > $r/compile.log 2>&1
grep -v DEBUG $r/compile.log | tail -25
