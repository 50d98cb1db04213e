#!/usr/bin/env bash
# The GPU suites that cover the new default (ALIGN_END where causal_block_cost takes it): the
# persistent kernels' tests whole, the causal backward (its gradients read the forward's LSE),
# and the LSE of aligned calls against float32.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run3; mkdir -p $r
export TESSEL_CACHE_DIR=$(mktemp -d)
cd test/gpu
timeout 150 python3 -c "
import torch, tessel
from tessel import attention as _
import importlib; att = importlib.import_module('tessel.attention')
for D, N, B, H in ((64, 4096, 2, 8), (64, 2048, 2, 8), (256, 1088, 2, 4)):
    q, k, v = (torch.randn(B, H, N, D, device='cuda', dtype=torch.float16) for _ in range(3))
    kern = tessel.compile_attention(q, k, v, causal=True)
    spec = {x[0]: x[3] for x in kern.specialization if x[1] == 'constexpr'}
    o, lse = tessel.attention(q, k, v, causal=True, return_lse=True)
    s = (q.float() @ k.float().transpose(-1, -2)) / D ** 0.5
    s = s.masked_fill(torch.ones(N, N, dtype=torch.bool, device='cuda').triu(1), float('-inf'))
    ref = torch.logsumexp(s, -1)
    o_ref = torch.softmax(s, -1) @ v.float()
    print(D, N, 'ALIGN_END', spec['ALIGN_END'], 'lse err', (lse - ref).abs().max().item(),
          'o err', (o.float() - o_ref).abs().max().item(), flush=True)
" 2>&1 | tee $r/lse.log
timeout 200 python3 -m pytest -q -p no:logging -n 8 test_persistent_gpu.py > $r/persistent.log 2>&1
tail -2 $r/persistent.log
timeout 200 python3 -m pytest -q -p no:logging -n 8 test_attention_backward_gpu.py -k causal \
  > $r/backward.log 2>&1; tail -2 $r/backward.log
