#!/usr/bin/env bash
# Forty-eighth session, for the next one (any one GPU): a few queries a sequence (speculative
# decoding) gathered for attention_with_kvcache's split-KV decode (varlen_cache.
# FEW_QUERIES_PACKED_CUDA, built on the interpreter, off on CUDA): its GPU cases beside the one
# launch, then its speed (bench_varlen_paged.py's spec case: 64 sequences of 5 queries).
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run6; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
timeout 120 python3 -m pytest -q test_serving_gpu.py -k "varlen_paged and spec" \
  > $r/cases.log 2>&1
tail -3 $r/cases.log
timeout 80 python3 bench_varlen_paged.py --keys 4096 16384 --cases spec decode \
  --json $r/spec.json 2>&1 | tail -8 | tee $r/spec.log
