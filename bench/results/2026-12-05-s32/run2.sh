#!/usr/bin/env bash
# Thirty-second session: d256 non-causal with whole key blocks takes the one-loop EVEN_N kernel
# (its cp.async producer keeps 56 registers, the consumers 224; was the split at 40/232). A/B
# of the build before (.bundle-base, its own Python) and after (.bundle + this tree's Python):
# bench_head_dims at d256, rounds alternated, one process each; then the GPU checks of d256
# (persistent even-keys/dense cases, Python float32 cases, FP8 d256 whose EVEN_N form is new).
set -u
a=$(mktemp -d); tar -C $a -xJf .bundle-base/tessel-gpu.tar.xz
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
r=$OUT/run2; mkdir -p $r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
for round in 1 2; do
  for side in a b; do
    w=${!side}
    PYTHONPATH=$w/python TESSEL_CACHE_DIR=$w/cache timeout 100 python3 bench_head_dims.py \
      --dims 256 --lengths 1024 4096 16384 --json $r/d256_${side}_$round.json 2>&1 | tail -7 \
      | sed "s/^/$side$round /" | tee -a $r/ab.log
  done
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
