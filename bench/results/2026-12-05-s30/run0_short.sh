#!/usr/bin/env bash
# Thirtieth session, for a device budget under 480 s: run0.sh's correctness half only — the
# persistent suite's key-loop and TMA cases and the Python suite's dense and alignment cases,
# at once — then the host's cold compile at d128.
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
r=$OUT/run0_short; mkdir -p $r; cd test/gpu
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader > $r/gpu.txt 2>&1
suite() {  # suite NAME SECONDS FILE [ARGS...]: one pytest process with a cache of its own
  local name=$1 s=$2; shift 2
  TESSEL_CACHE_DIR=$w/cache-$name timeout $s python3 -m pytest -q -p no:cacheprovider "$@" \
    > $r/$name.log 2>&1; echo "$name rc=$?" >> $r/rc.log
}
suite persistent 200 test_persistent_gpu.py -k "tail or diagonal or even or tma or dense" &
suite python 200 test_python_gpu.py -k "matches_float32 or aligned or bshd" &
wait
cat $r/gpu.txt $r/rc.log; for f in $r/*.log; do echo "== $f"; grep -E "passed|failed|FAILED|Error" $f | tail -8; done
(cd ../.. && TESSEL_CACHE_DIR=$w/cache timeout 40 python3 scripts/bench_cold_compile.py \
  --runs 2 --dims 128 --kinds full,ragged --build $w 2>&1 | grep -E "^d|ptxas  |first_call" \
  | tee $r/cold.log)
