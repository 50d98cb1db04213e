#!/usr/bin/env bash
# For a later call: d256's one open bar (non-causal 16k, 0.93-0.99x cuDNN on H100s). An A/B of
# the ping-pong between its two consumer warpgroups (measured at d128 only: +4-5 % at 4k), two
# rounds, d256 dense and ragged; then O's rescale beside the next S (rescale_under_s) once more.
set -u
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/next3; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
timeout 280 python3 ab_gpu_options.py $r/pingpong --set pingpong=False --cases d256 ragged256 \
  --rounds 2 2>&1 | tail -14 | tee $r/pingpong.log
timeout 280 python3 ab_gpu_options.py $r/rescale --set rescale_under_s=True --cases d256 \
  --rounds 2 2>&1 | tail -8 | tee $r/rescale.log
