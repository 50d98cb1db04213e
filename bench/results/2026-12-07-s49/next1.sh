#!/usr/bin/env bash
# For the next session (an sm_90a GPU): attention_varlen with gradients and v narrower than q
# (MLA training on packed sequences) at v's own width — the varlen kernel's DV forward and the
# varlen programs' DV (varlen_backward.VALUE_HEAD_DIM_CUDA, off until this passes) — its GPU
# cases, then its speed against the padded call (bench_varlen.py --backward --dv --flip):
# turn it on if it passes and is faster.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/next1; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
timeout 200 python3 -m pytest -q test_serving_gpu.py -k "varlen_value_head_dim_gradients" \
  > $r/cases.log 2>&1
tail -3 $r/cases.log
for dims in "192 128" "128 64"; do
  set -- $dims
  timeout 120 python3 bench_varlen.py --backward --d $1 --dv $2 --h 16 --hkv 16 \
    --flip tessel.varlen_backward.VALUE_HEAD_DIM_CUDA --json $r/train_$1x$2.json 2>&1 \
    | grep -v W12 | tail -6 | tee $r/train_$1x$2.log
done
