#!/usr/bin/env bash
# Fiftieth session, first call (asked as nvidia-h200). On an H200: issue 16's sweep beside cuDNN
# and FA2 (s48 run1.sh's first part, fp16 + bf16). On an H100: s49's next1.sh (attention_varlen
# with gradients at v's own width: its GPU cases and speed), then an A/B of O's rescale beside S
# at d256 (GpuOptions.rescale_under_s; the H200 round s35 left owed, two processes each).
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run1; mkdir -p $r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.limit --format=csv \
  | tee $r/gpu.txt
if grep -q H200 $r/gpu.txt; then
  cd test/gpu
  for dt in fp16 bf16; do
    timeout 270 python3 bench_head_dims.py --dims 64 128 256 --lengths 1024 4096 16384 \
      --dtype $dt --json $r/dims_$dt.json 2>&1 | tail -22 | tee $r/dims_$dt.log
  done
  exit 0
fi
bash bench/results/2026-12-07-s49/next1.sh
cd test/gpu
timeout 250 python3 ab_gpu_options.py $r/ab_rescale --set rescale_under_s=True \
  --cases d256 ragged256 --rounds 2 --timeout 90 2>&1 | tail -12 | tee $r/ab_rescale.log
