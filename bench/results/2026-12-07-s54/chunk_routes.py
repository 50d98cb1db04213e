"""flash_attn_func's attention_chunk by its two routes, one process: the `q_idx // C ==
kv_idx // C` mask_mod (tessel.attention; tile-floor-quotient-ranges classifies it) and packed
varlen sequences, forward and forward + backward, causal and not; triton.testing.do_bench
medians, each call with its allocation. fp16 d128 B1 H16 N keys (argv[1])."""
import sys

import torch
import triton.testing

from tessel import flash

N = int(sys.argv[1]) if len(sys.argv) > 1 else 16384
H, D = 16, 128


def timed(route, q, k, v, C, causal, grad):
    flash.CHUNK_MASK_MAX = 1 << 30 if route == "mask" else 0
    g = torch.randn_like(q)

    def call():
        out = flash.flash_attn_func(q, k, v, causal=causal, attention_chunk=C)
        if grad:
            out.backward(g)
        return out
    out = call()
    return out, triton.testing.do_bench(call, grad_to_none=[q, k, v] if grad else None)


for causal in (True, False):
    for C in (512, 1024, 2048, 4096, 8192):
        row = []
        for grad in (False, True):
            q, k, v = (torch.randn(1, N, H, D, device="cuda", dtype=torch.float16,
                                   requires_grad=grad) for _ in range(3))
            om, tm = timed("mask", q, k, v, C, causal, grad)
            op, tp = timed("packed", q, k, v, C, causal, grad)
            row.append(f"{'fwd+bwd' if grad else 'fwd'} mask {tm:.3f} packed {tp:.3f} ms "
                       f"({tp / tm:.2f}x) diff {(om - op).abs().max().item():.1e}")
        print(f"N {N} C {C:5d} {'causal' if causal else 'full  '}: " + "; ".join(row),
              flush=True)
