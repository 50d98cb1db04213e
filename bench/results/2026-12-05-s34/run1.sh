#!/usr/bin/env bash
# Thirty-fourth session, first call: the backward GPU suite on s33's final build (the 1-D loads
# by a branch per register), d256's four float64 cases first (s33 ran out of device time before
# them), then the whole suite, on pytest-xdist workers where the machine has it.
set -u
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/run1; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
timeout 150 python3 -m pytest -q -p no:cacheprovider test_attention_backward_gpu.py \
  -k "other_head_dims and 256" > $r/d256.log 2>&1
echo "d256 rc=$?"; tail -3 $r/d256.log
n=""; python3 -c "import xdist" 2>/dev/null && n="-n 6"
echo "xdist: ${n:-none}"
timeout 400 python3 -m pytest -q -p no:cacheprovider $n test_attention_backward_gpu.py \
  > $r/backward.log 2>&1
echo "backward rc=$?"; grep -E "passed|failed|FAILED|Error" $r/backward.log | tail -8
