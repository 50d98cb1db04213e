#!/usr/bin/env bash
# tessel under torch.compile and tessel.scaled_dot_product_attention on the GPU: their GPU tests,
# train_gpt.py with both models under torch.compile(fullgraph=True) and eager (same call), and
# bench_sdpa.py (tessel.scaled_dot_product_attention beside torch's SDPA, same masks).
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run3; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
export TESSEL_CACHE_DIR=$(mktemp -d)
(cd test/gpu && timeout 240 python3 -m pytest -q -p no:logging test_torch_compile_gpu.py \
  test_sdpa_gpu.py > $r/tests.log 2>&1; grep -v DEBUG $r/tests.log | tail -15)
for mode in --compile ""; do
  timeout 100 python3 examples/python/train_gpt.py --steps 120 $mode \
    --json $r/train${mode:+_compiled}.json 2>&1 | grep -v "W12\|step " | tail -4 \
    | tee $r/train${mode:+_compiled}.log
done
(cd test/gpu && for bw in "" --backward; do timeout 60 python3 bench_sdpa.py $bw \
  --json $r/sdpa${bw:+_bwd}.json 2>&1 | grep -v W12 | tail -6 | tee $r/sdpa${bw:+_bwd}.log; done)
