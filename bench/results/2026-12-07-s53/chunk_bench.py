"""Chunked local attention on the GPU (fp16, d128, causal, B=1, H=16, N keys): tessel.attention
with a `q_idx // C == kv_idx // C` mask_mod (tile-floor-quotient-ranges classifies it), tessel.flash
with attention_chunk (packed varlen sequences), and the dense causal call beside them;
triton.testing.do_bench medians, each call with its allocation. TFLOP/s count the chunked
work (causal within chunks)."""
import sys

import torch
import triton.testing

import tessel
from tessel import flash

N = int(sys.argv[1]) if len(sys.argv) > 1 else 16384
H, D = 16, 128
q, k, v = (torch.randn(1, N, H, D, device="cuda", dtype=torch.float16) for _ in range(3))
qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
for C in (1024, 2048, 8192):
    def same_chunk(b, h, q_idx, kv_idx):
        return q_idx // C == kv_idx // C
    work = 4 * H * D * (N // C) * C * C / 2            # causal pairs within the chunks
    ms_mod = triton.testing.do_bench(
        lambda: tessel.attention(qt, kt, vt, causal=True, mask_mod=same_chunk))
    ms_flash = triton.testing.do_bench(
        lambda: flash.flash_attn_func(q, k, v, causal=True, attention_chunk=C))
    ms_dense = triton.testing.do_bench(lambda: tessel.attention(qt, kt, vt, causal=True))
    a = tessel.attention(qt, kt, vt, causal=True, mask_mod=same_chunk).transpose(1, 2)
    b = flash.flash_attn_func(q, k, v, causal=True, attention_chunk=C)
    print(f"N {N} C {C:5d}: mask_mod {ms_mod:.3f} ms ({work / ms_mod / 1e9:.0f} TFLOP/s)  "
          f"attention_chunk {ms_flash:.3f} ms ({work / ms_flash / 1e9:.0f})  "
          f"dense causal {ms_dense:.3f} ms  max diff {(a - b).abs().max().item():.2e}",
          flush=True)
