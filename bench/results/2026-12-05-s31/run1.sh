#!/usr/bin/env bash
# Thirty-first session: the backward suite (its key-rows program now launched as the generic,
# unsearched variant where NO_SPILL_SEARCH says so) and the backward's first call on the host.
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
r=$OUT/run1; mkdir -p $r; cd test/gpu
TESSEL_CACHE_DIR=$w/cache-bwd timeout 420 python3 -m pytest -q -p no:cacheprovider \
  test_attention_backward_gpu.py > $r/backward.log 2>&1; echo "backward rc=$?" | tee $r/rc.log
grep -E "passed|failed|FAILED|Error" $r/backward.log | tail -8
TESSEL_CACHE_DIR=$(mktemp -d) TESSEL_TIMING=1 timeout 120 python3 - <<'PY' 2>&1 | tail -20 | tee $r/first_call.log
import time, torch, tessel
for causal in (False, True):
    q, k, v = (torch.randn(2, 8, 2048, 128, device="cuda", dtype=torch.float16,
                           requires_grad=True) for _ in range(3))
    t0 = time.perf_counter(); o = tessel.attention(q, k, v, causal=causal); torch.cuda.synchronize()
    t1 = time.perf_counter(); o.sum().backward(); torch.cuda.synchronize(); t2 = time.perf_counter()
    print(f"d128 causal={causal}: forward first call {t1 - t0:.2f} s, backward {t2 - t1:.2f} s")
PY
