"""Causal query blocks aligned to the last row (attention.ALIGN_QUERY_BLOCKS_TO_END) against
blocks from row 0, beside cuDNN, one process: tessel.attention(causal=True) timed with the
switch on and off in turn, `--rounds` times a row (medians), triton.testing.do_bench, each call
with its output allocation. Shapes as the anchors': b·n = 16384 tokens, h·d = 2048. Also the
largest difference between the two (they differ only in how rows group into blocks)."""
import argparse
import importlib
import statistics

import torch
import triton.testing
from torch.nn.attention import SDPBackend, sdpa_kernel

import tessel

att = importlib.import_module("tessel.attention")
ap = argparse.ArgumentParser()
ap.add_argument("--cases", nargs="+", default=["64:2048", "64:4096", "64:8192", "64:16384",
                                               "64:3000", "256:4000", "128:1000"])
ap.add_argument("--rounds", type=int, default=2)
ap.add_argument("--dtype", default="fp16")
a = ap.parse_args()
dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[a.dtype]
print(f"{torch.cuda.get_device_name()}  {a.dtype}  causal  (TFLOP/s: aligned | from row 0 | "
      "cuDNN; ratios aligned / row 0, aligned / cuDNN)")
for case in a.cases:
    D, N = (int(x) for x in case.split(":"))
    H, B = 2048 // D, max(1, 16384 // N)
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=dt) for _ in range(3))
    flops = 4 * B * H * N * N * D / 2

    def run(on):
        att.ALIGN_QUERY_BLOCKS_TO_END = on
        att._cuda_configs.clear()
        out = tessel.attention(q, k, v, causal=True)
        return out, triton.testing.do_bench(lambda: tessel.attention(q, k, v, causal=True))

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return triton.testing.do_bench(
                lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v,
                                                                         is_causal=True))
    on, off, cd = [], [], []
    for _ in range(a.rounds):
        o1, t = run(True)
        on.append(t)
        o0, t = run(False)
        off.append(t)
        cd.append(cudnn())
    att.ALIGN_QUERY_BLOCKS_TO_END = True
    att._cuda_configs.clear()
    kernel = tessel.compile_attention(q, k, v, causal=True)
    spec = {x[0]: x[3] for x in kernel.specialization if x[1] == "constexpr"}
    t1, t0, tc = (statistics.median(x) for x in (on, off, cd))
    print(f"d{D} n{N} B{B} H{H} {spec['BLOCK_M']}x{spec['BLOCK_N']} "
          f"ALIGN_END={spec.get('ALIGN_END')}: {flops / t1 / 1e9:.1f} | {flops / t0 / 1e9:.1f} | "
          f"{flops / tc / 1e9:.1f}  {t0 / t1:.3f}  {tc / t1:.3f}  "
          f"diff {(o1.float() - o0.float()).abs().max().item():.1e}", flush=True)
