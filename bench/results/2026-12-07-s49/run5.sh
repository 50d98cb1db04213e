#!/usr/bin/env bash
# Forty-ninth session, any one GPU: the varlen backward programs on the compact grid
# (varlen_backward.TILES_CUDA, off until this passes): their GPU cases on both grids, then
# forward + backward speed on the other grid (bench_varlen.py --backward --tiles), uniform
# lengths and one long sequence beside short ones (--short-max); the forward on the latter.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run5; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
timeout 240 python3 -m pytest -q test_serving_gpu.py -k "varlen_programs_backward" \
  > $r/cases.log 2>&1
tail -3 $r/cases.log
timeout 90 python3 bench_varlen.py --backward --tiles --json $r/bwd.json 2>&1 | grep -v W12 \
  | tail -5 | tee $r/bwd.log
timeout 90 python3 bench_varlen.py --backward --tiles --max-len 16384 --short-max 512 \
  --json $r/bwd_skew.json 2>&1 | grep -v W12 | tail -5 | tee $r/bwd_skew.log
timeout 60 python3 bench_varlen.py --tiles --max-len 16384 --short-max 512 \
  --json $r/fwd_skew.json 2>&1 | grep -v W12 | tail -5 | tee $r/fwd_skew.log
