"""Blocks of the backward's two programs on sm_90a, one process beside FA2: the key-rows dK/dV
program at 64 query × 128 key rows (two warpgroups), the dQ program at 128 query rows.

    PYTHONPATH=build/python python3 bench/results/2026-12-03-h200-backward-blocks/blocks.py

Each variant sets backward.FAST_KEYROWS_BLOCKS_SM90 / FAST_DQ_BLOCKS_SM90 for one head dim;
`diff` is the largest |variant − default| of dq, dk, dv over the default's largest value (the
default is the one test/gpu/test_attention_backward_gpu.py checks against float64).
"""
import torch
import tessel
import tessel.backward as tb
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

F = torch.nn.functional.scaled_dot_product_attention
VARIANTS = {64: [("kr 64x128", {64: (64, 128)}, None), ("dq 128x64", None, {64: (128, 64)}),
                 ("kr 64x128 + dq 128x64", {64: (64, 128)}, {64: (128, 64)}),
                 ("dq 128x128", None, {64: (128, 128)})],
            128: [("kr 64x128", {128: (64, 128)}, None)]}
gen = torch.Generator(device="cuda").manual_seed(0)
kr0, dq0 = dict(tb.FAST_KEYROWS_BLOCKS_SM90), dict(tb.FAST_DQ_BLOCKS_SM90)
for D, n in ((64, 16384), (64, 4096), (128, 16384)):
    H, B = 2048 // D, max(1, 16384 // n)
    for causal in (False, True):
        flops = 2.5 * 4 * B * H * n * n * D / (2 if causal else 1)
        q, k, v, do = (torch.randn(B, H, n, D, device="cuda", dtype=torch.float16, generator=gen)
                       for _ in range(4))
        o, lse = tessel.attention(q, k, v, causal=causal, return_lse=True)
        leaves = [x.clone().requires_grad_() for x in (q, k, v)]
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            out = F(*leaves, is_causal=causal)
        fa2 = triton.testing.do_bench(lambda: torch.autograd.grad(out, leaves, do,
                                                                  retain_graph=True),
                                      return_mode="median")

        def ours():
            return tessel.attention_backward(q, k, v, o, lse, do, causal=causal)
        want = ours()
        cells = [f"FA2 {flops / fa2 / 1e9:.0f}",
                 f"default {flops / triton.testing.do_bench(ours, return_mode='median') / 1e9:.0f}"]
        for name, kr, dq in VARIANTS[D]:
            tb.FAST_KEYROWS_BLOCKS_SM90 = {**kr0, **(kr or {})}
            tb.FAST_DQ_BLOCKS_SM90 = {**dq0, **(dq or {})}
            try:
                got = ours()
                diff = max(((a - b).abs().max() / b.abs().max()).item() for a, b in zip(got, want))
                ms = triton.testing.do_bench(ours, return_mode="median")
                cells.append(f"{name} {flops / ms / 1e9:.0f} (diff {diff:.1e})")
            except Exception as e:                   # noqa: BLE001 (a variant that fails)
                cells.append(f"{name} failed: {type(e).__name__}: {str(e)[:120]}")
            tb.FAST_KEYROWS_BLOCKS_SM90, tb.FAST_DQ_BLOCKS_SM90 = dict(kr0), dict(dq0)
        print(f"d{D} n{n} causal={causal} TFLOP/s: " + ", ".join(cells), flush=True)
        del q, k, v, do, o, lse, leaves, out, want
