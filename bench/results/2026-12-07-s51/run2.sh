#!/usr/bin/env bash
# Second call (warm H100): the document-mask compile case again (deterministic dq), then s49's
# next1.sh (attention_varlen with gradients at v's own width: cases and speed).
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run2; mkdir -p $r
(cd test/gpu && timeout 120 python3 -m pytest -q -p no:logging test_torch_compile_gpu.py \
  -k document > $r/tests.log 2>&1; grep -v DEBUG $r/tests.log | tail -3)
bash bench/results/2026-12-07-s49/next1.sh
