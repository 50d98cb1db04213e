#!/usr/bin/env bash
# Thirtieth session, the one call a short device budget allows: the checks that matter most for
# this session's defaults (the last key block first, tma_only, the LLVM passes left out) — the
# persistent suite, the dense/layout/alignment/FlashAttention-argument cases of the Python
# suite, the block masks (their kernel takes tma_only) at once — then one A/B round of the
# last key block first (dense and ragged lengths) and the host's cold compile. run1.sh and
# run2.sh are the fuller versions.
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
r=$OUT/run0; mkdir -p $r; cd test/gpu
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader > $r/gpu.txt 2>&1
suite() {  # suite NAME SECONDS FILE [ARGS...]: one pytest process with a cache of its own
  local name=$1 s=$2; shift 2
  TESSEL_CACHE_DIR=$w/cache-$name timeout $s python3 -m pytest -q -p no:cacheprovider "$@" \
    > $r/$name.log 2>&1; echo "$name rc=$?" >> $r/rc.log
}
suite persistent 250 test_persistent_gpu.py &
suite python 250 test_python_gpu.py -k "matches_float32 or strided or bshd or aligned or flash_arguments or fast_path or head_dim_256" &
suite block_mask 250 test_block_mask_gpu.py &
wait
cat $r/gpu.txt $r/rc.log; for f in $r/*.log; do echo "== $f"; grep -E "passed|failed|FAILED|Error" $f | tail -8; done
export TESSEL_CACHE_DIR=$w/cache
timeout 100 python3 ab_gpu_options.py $r/tail --grid attention.TAIL_BLOCK_FIRST=False \
  --cases dense ragged --rounds 1 --timeout 50 2>&1 | tail -10 | tee $r/tail.log
(cd ../.. && timeout 50 python3 scripts/bench_cold_compile.py --runs 2 --dims 128,256 \
  --kinds full,ragged,causal-long --build $w 2>&1 | grep -E "^d|ptxas  |first_call" | tee $r/cold.log)
