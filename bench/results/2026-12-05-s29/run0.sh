#!/usr/bin/env bash
# Twenty-ninth session, first GPU call: the new defaults' correctness, four processes at once —
# EVEN_N and DIAGONAL_BLOCK_FIRST (test_persistent_gpu.py), tessel.attention's dense calls and
# FlashAttention's arguments (test_python_gpu.py), the serving kernels with window and cap,
# the block-mask kernels (their spill fallbacks' compiles run ahead now).
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
r=$OUT/run0; mkdir -p $r; cd test/gpu
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader > $r/gpu.txt 2>&1
suite() {  # suite NAME SECONDS ARGS...: one pytest process with a cache of its own
  local name=$1 s=$2; shift 2
  TESSEL_CACHE_DIR=$w/cache-$name timeout $s python3 -m pytest -q -p no:cacheprovider "$@" \
    > $r/$name.log 2>&1; echo "$name rc=$?" >> $r/rc.log
}
suite persistent 480 test_persistent_gpu.py &
suite python 480 test_python_gpu.py &
suite serving 480 test_serving_gpu.py -k "flash_arguments or kvcache_split_fast or varlen" &
suite masks 480 test_block_mask_gpu.py test_captured_gpu.py &
wait
cat $r/gpu.txt $r/rc.log; for f in $r/*.log; do echo "== $f"; grep -E "passed|failed|FAILED|Error" $f | tail -8; done
