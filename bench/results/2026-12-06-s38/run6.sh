#!/usr/bin/env bash
# Thirty-eighth session, a short last call: test_serving_gpu's new test_grad_of_q_alone, then
# short rows (1k, 2k) at d64/d128 with 128x128 beside the defaults (64x128 / 64x64 below 2k),
# where causal 1k sits at 0.86-0.91x cuDNN.
set -u
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/run6; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
timeout 60 python3 -m pytest -q -p no:cacheprovider test/gpu/test_serving_gpu.py -k grad_of_q 2>&1 \
  | tail -3 | tee $r/grad.log
cd test/gpu
timeout 110 python3 bench_head_dims.py --dims 64 128 --lengths 1024 2048 --sweep 128x128 \
  --json $r/short.json 2>&1 | tail -10 | tee $r/short.log
