#!/usr/bin/env bash
# Fifty-first session, first call. Both chips: test_torch_compile_gpu.py whole (split form;
# document masks and block masks in the graph) and test_flex_gpu.py (tessel.flex_attention),
# bench_block_mask.py with the drop-in column. On an H200: issue 16's sweep beside cuDNN and FA2
# (fp16 + bf16). On an H100: O's rescale beside S at d256 (GpuOptions.rescale_under_s).
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run1; mkdir -p $r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.limit --format=csv \
  | tee $r/gpu.txt
export TESSEL_CACHE_DIR=$(mktemp -d)
cd test/gpu
timeout 200 python3 -m pytest -q -p no:logging test_torch_compile_gpu.py test_flex_gpu.py \
  > $r/tests.log 2>&1; grep -v DEBUG $r/tests.log | tail -8
timeout 120 python3 bench_block_mask.py --json $r/masks.json 2>&1 | grep -v W12 | tail -10 \
  | tee $r/masks.log
if grep -q H200 $r/gpu.txt; then
  for dt in fp16 bf16; do
    timeout 120 python3 bench_head_dims.py --dims 64 128 256 --lengths 4096 16384 \
      --dtype $dt --json $r/dims_$dt.json 2>&1 | tail -10 | tee $r/dims_$dt.log
  done
  exit 0
fi
timeout 150 python3 ab_gpu_options.py $r/ab_rescale --set rescale_under_s=True \
  --cases d256 ragged256 --rounds 2 --timeout 70 2>&1 | tail -12 | tee $r/ab_rescale.log
