#!/usr/bin/env bash
# Forty-ninth session, any sm_90a GPU: v narrower than q with gradients (MLA training) through
# the DV forward and the backward on padded v, o and dO (attention.VALUE_HEAD_DIM_GRAD, off
# until this passes): its GPU cases beside the padded route, then forward + backward speed
# (bench_value_head_dim.py --backward) beside the padded call and cuDNN.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run7; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
timeout 200 python3 -m pytest -q test_python_gpu.py -k "value_head_dim_of_its_own" \
  > $r/cases.log 2>&1
tail -3 $r/cases.log
for dt in fp16 bf16; do
  timeout 150 python3 bench_value_head_dim.py --backward --dtype $dt --dims 192x128 128x64 \
    --lengths 4096 16384 2>&1 | grep -v W12 | tail -10 | tee $r/train_$dt.log
done
