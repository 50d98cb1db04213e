#!/usr/bin/env bash
# Fifty-first session, first call. Both chips: test_torch_compile_gpu.py whole (its split form:
# module-level mods under fullgraph, the closure lambda without). On an H200: issue 16's sweep
# beside cuDNN and FA2 (fp16 + bf16). On an H100: O's rescale beside S at d256
# (GpuOptions.rescale_under_s, two processes each), then s49's next1.sh (varlen DV gradients).
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run1; mkdir -p $r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.limit --format=csv \
  | tee $r/gpu.txt
(cd test/gpu && timeout 120 python3 -m pytest -q -p no:logging test_torch_compile_gpu.py \
  > $r/compile.log 2>&1; grep -v DEBUG $r/compile.log | tail -5)
if grep -q H200 $r/gpu.txt; then
  cd test/gpu
  for dt in fp16 bf16; do
    timeout 200 python3 bench_head_dims.py --dims 64 128 256 --lengths 4096 16384 \
      --dtype $dt --json $r/dims_$dt.json 2>&1 | tail -16 | tee $r/dims_$dt.log
  done
  exit 0
fi
(cd test/gpu && timeout 200 python3 ab_gpu_options.py $r/ab_rescale --set rescale_under_s=True \
  --cases d256 ragged256 --rounds 2 --timeout 90 2>&1 | tail -12 | tee $r/ab_rescale.log)
bash bench/results/2026-12-07-s49/next1.sh
