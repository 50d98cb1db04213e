"""tessel.attention on [B, N, H, D] tensors seen as [B, H, N, D] (FlashAttention's layout, what
`x.view(B, N, H, D).transpose(1, 2)` gives): read in place, against the same call on
contiguous tensors and on `.contiguous()` copies (what tessel did before 2026-12-03), beside
cuDNN and FA2 on the same views. do_bench median, TFLOP/s; lab script of 2026-12-03.
    PYTHONPATH=... python3 bench_layouts.py [--json OUT]
"""
import argparse
import json
import sys

import torch
from triton.testing import do_bench
from torch.nn.attention import SDPBackend, sdpa_kernel

import tessel

ap = argparse.ArgumentParser()
ap.add_argument("--json")
a = ap.parse_args()
F = torch.nn.functional.scaled_dot_product_attention
rows = []
warm = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
for _ in range(200):
    warm @ warm
for D in (64, 128):
    H = 2048 // D
    for n in (4096, 16384):
        B = 16384 // n
        for causal in (False, True):
            bshd = [torch.randn(B, n, H, D, device="cuda", dtype=torch.float16).transpose(1, 2)
                    for _ in range(3)]
            cont = [x.contiguous() for x in bshd]
            flops = 4 * B * H * n * n * D / (2 if causal else 1)

            def sd(be):
                def f():
                    with sdpa_kernel(be):
                        return F(*bshd, is_causal=causal)
                return f
            fns = {"contiguous": lambda: tessel.attention(*cont, causal=causal),
                   "in_place": lambda: tessel.attention(*bshd, causal=causal),
                   "copied": lambda: tessel.attention(*(x.contiguous() for x in bshd),
                                                      causal=causal),
                   "cudnn": sd(SDPBackend.CUDNN_ATTENTION), "fa2": sd(SDPBackend.FLASH_ATTENTION)}
            r = {"d": D, "n": n, "causal": causal}
            for name, fn in fns.items():
                r[name] = flops / do_bench(fn, warmup=25, rep=100, return_mode="median") / 1e9
            rows.append(r)
            print(" ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}"
                           for k, v in r.items()), flush=True)
if a.json:
    json.dump(rows, open(a.json, "w"), indent=1)
