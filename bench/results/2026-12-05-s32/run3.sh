#!/usr/bin/env bash
# Thirty-second session, after run2.sh (whose new build gave the split kernels' consumers 224
# registers too: the causal persistent kernel spilled and gave its overlap up). The producer's
# 48 now only beside one key loop (EVEN_N); the split keeps 40/232, so its PTX is the base's.
# A third A/B round of the build before (.bundle-base) and after, d256; then the GPU checks of
# d256 on the new build (persistent dense/even-keys cases, Python float32 cases, FP8 d256 whose
# EVEN_N form is new), side by side.
set -u
a=$(mktemp -d); tar -C $a -xJf .bundle-base/tessel-gpu.tar.xz
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
r=$OUT/run3; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
for side in a b; do
  w=${!side}
  PYTHONPATH=$w/python TESSEL_CACHE_DIR=$w/cache timeout 90 python3 bench_head_dims.py \
    --dims 256 --lengths 1024 4096 16384 --json $r/d256_$side.json 2>&1 | tail -9 \
    | sed "s/^/$side /" | tee -a $r/ab.log
done
export PYTHONPATH=$b/python
suite() {  # suite NAME SECONDS FILE [ARGS...]
  local name=$1 s=$2; shift 2
  TESSEL_CACHE_DIR=$b/cache-$name timeout $s python3 -m pytest -q -p no:cacheprovider "$@" \
    > $r/$name.log 2>&1; echo "$name rc=$?" >> $r/rc.log
}
suite persistent 200 test_persistent_gpu.py -k "256" &
suite python 200 test_python_gpu.py -k "256" &
suite fp8 200 test_fp8_gpu.py -k "256" &
wait
cat $r/rc.log; for f in $r/*.log; do echo "== $f"; grep -E "passed|failed|FAILED|Error" $f | tail -6; done
