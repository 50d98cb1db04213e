#!/usr/bin/env bash
# For a later call: the differential fuzzer on the GPU (scripts/fuzz_differential.py --device
# cuda): random shapes and options through tessel.attention, its backward, attention_varlen and
# attention_with_kvcache on CUDA tensors (fp16/bf16, d64/128/256), each against float64.
set -u
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/next4; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
timeout 560 python3 scripts/fuzz_differential.py --device cuda --seconds 500 --seed 1 \
  > $r/fuzz.log 2>&1
echo "rc=$?"; tail -25 $r/fuzz.log
