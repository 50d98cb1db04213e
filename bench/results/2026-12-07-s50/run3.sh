#!/usr/bin/env bash
# tessel under torch.compile on the GPU: its GPU tests (run2.sh), then train_gpt.py with both
# models under torch.compile(fullgraph=True) — tessel's op in the graph against SDPA's — and
# eager for the same-call baseline.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run3; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
export TESSEL_CACHE_DIR=$(mktemp -d)
(cd test/gpu && timeout 300 python3 -m pytest -q -p no:logging test_torch_compile_gpu.py \
  > $r/compile_tests.log 2>&1; grep -v DEBUG $r/compile_tests.log | tail -15)
for mode in --compile ""; do
  timeout 130 python3 examples/python/train_gpt.py --steps 150 $mode \
    --json $r/train${mode:+_compiled}.json 2>&1 | grep -v "W12\|step " | tail -5 \
    | tee $r/train${mode:+_compiled}.log
done
