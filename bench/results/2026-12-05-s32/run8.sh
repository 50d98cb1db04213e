#!/usr/bin/env bash
# Not run yet (written in the thirty-second session, no device time left): d256 at 128x80
# (FlashAttention-3's d256 key block), which compiles with 0 spill in 224.75 KiB of shared
# memory (non-persistent, causal and not; the causal persistent kernel spills 68 bytes, so
# causal calls at 128x80 run one program a tile). First a float32 check of 128x80 on the
# GPU (the wgmma path has not run N = 80 before), then its speed beside the default 128x64.
set -u
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python \
  TESSEL_CACHE_DIR=$b/cache
r=$OUT/run8; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
timeout 120 python3 - <<'PY' 2>&1 | grep -v "^tessel:" | tee $r/check.log
import torch, tessel
g = torch.Generator(device="cuda").manual_seed(0)
for n in (80, 1000, 4096):
    for causal in (False, True):
        q, k, v = (torch.randn(2, 4, n, 256, device="cuda", generator=g).half() for _ in range(3))
        o = tessel.attention(q, k, v, causal=causal, block_m=128, block_n=80)
        ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                               is_causal=causal)
        print(f"n={n} causal={causal}: max |o - float32| {(o.float() - ref).abs().max().item():.2e}")
PY
cd test/gpu
for round in 1 2; do
  timeout 120 python3 bench_head_dims.py --dims 256 --lengths 1024 4096 16384 --sweep 128x80 \
    --json $r/d256_$round.json 2>&1 | grep -E "^ 256" | sed "s/^/$round /" | tee -a $r/sweep.log
done
