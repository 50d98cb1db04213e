#!/usr/bin/env bash
# Ran in the thirty-fifth session (call 9, an H100: 20/20). alibi_slopes on the serving
# APIs (varlen, the KV cache one program a head and split-KV, whose rows are several heads)
# against float64, fp16 and bf16, with window+cap beside it (test_serving_gpu.py
# test_flash_arguments: 16 cases) and attention_varlen's new backward (test_varlen_backward: 4).
set -u
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/run2; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
timeout 300 python3 -m pytest -q -p no:cacheprovider test_serving_gpu.py -k "flash_arguments or varlen_backward" \
  > $r/serving.log 2>&1
echo "serving rc=$?"; tail -3 $r/serving.log
