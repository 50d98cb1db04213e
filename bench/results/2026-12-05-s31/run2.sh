#!/usr/bin/env bash
# Thirty-first session, after s30 run0 (TAIL_BLOCK_FIRST measured slower: now off; the even-keys
# test's expectation fixed): the backward suite on this session's compile changes, the Python
# suite's float32 cases and the persistent even-keys cases again, side by side; then the
# backward's first call on the host.
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
r=$OUT/run2; mkdir -p $r; cd test/gpu
suite() {  # suite NAME SECONDS FILE [ARGS...]: one pytest process with a cache of its own
  local name=$1 s=$2; shift 2
  TESSEL_CACHE_DIR=$w/cache-$name timeout $s python3 -m pytest -q -p no:cacheprovider "$@" \
    > $r/$name.log 2>&1; echo "$name rc=$?" >> $r/rc.log
}
suite backward 300 test_attention_backward_gpu.py &
suite python 300 test_python_gpu.py -k "matches_float32" &
suite persistent 300 test_persistent_gpu.py -k "even_keys or tail_block_first" &
wait
cat $r/rc.log; for f in $r/*.log; do echo "== $f"; grep -E "passed|failed|FAILED|Error" $f | tail -6; done
TESSEL_CACHE_DIR=$(mktemp -d) timeout 90 python3 - <<'PY' 2>&1 | tail -6 | tee $r/first_call.log
import time, torch, tessel
for causal in (False, True):
    q, k, v = (torch.randn(2, 8, 2048, 128, device="cuda", dtype=torch.float16,
                           requires_grad=True) for _ in range(3))
    t0 = time.perf_counter(); o = tessel.attention(q, k, v, causal=causal); torch.cuda.synchronize()
    t1 = time.perf_counter(); o.sum().backward(); torch.cuda.synchronize(); t2 = time.perf_counter()
    print(f"d128 causal={causal}: forward first call {t1 - t0:.2f} s, backward {t2 - t1:.2f} s")
PY
