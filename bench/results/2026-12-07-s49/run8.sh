#!/usr/bin/env bash
# Forty-ninth session, an sm_90a GPU: the backward's own programs at v's head dim (the key-rows
# and dQ programs' DV: backward.VALUE_HEAD_DIM_BACKWARD_CHIPS, empty until this passes) for a v
# narrower than q (MLA training, 192/128) — its GPU cases (route dv_programs) and the
# padded/dv routes beside it, then forward + backward speed of the three routes beside cuDNN.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run8; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
timeout 200 python3 -m pytest -q test_python_gpu.py -k "value_head_dim_of_its_own" \
  > $r/cases.log 2>&1
tail -3 $r/cases.log
for dt in fp16; do
  timeout 150 python3 bench_value_head_dim.py --backward --dtype $dt --dims 192x128 128x64 \
    --lengths 4096 16384 2>&1 | grep -v W12 | tail -10 | tee $r/train_$dt.log
done
