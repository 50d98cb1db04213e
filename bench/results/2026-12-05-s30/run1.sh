#!/usr/bin/env bash
# Thirtieth session, call 1: the GPU suites on the defaults of the twenty-ninth and thirtieth
# sessions (EVEN_N, the diagonal and the last key block first, tma_only, the LLVM passes
# skipped), four processes at once (their compiles overlap), each bounded.
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
r=$OUT/run1; mkdir -p $r; cd test/gpu
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader > $r/gpu.txt 2>&1
suite() {  # suite NAME SECONDS FILE [ARGS...]: one pytest process with a cache of its own
  local name=$1 s=$2; shift 2
  TESSEL_CACHE_DIR=$w/cache-$name timeout $s python3 -m pytest -q -p no:cacheprovider "$@" \
    > $r/$name.log 2>&1; echo "$name rc=$?" >> $r/rc.log
}
suite python 440 test_python_gpu.py &
suite persistent 400 test_persistent_gpu.py &
suite block_mask 300 test_block_mask_gpu.py test_captured_gpu.py &
suite backward 300 test_attention_backward_gpu.py test_fp8_gpu.py &
wait
cat $r/gpu.txt $r/rc.log; for f in $r/*.log; do echo "== $f"; grep -E "passed|failed|FAILED|Error" $f | tail -8; done
