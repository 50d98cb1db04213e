"""Host cost of tessel.attention's forward + backward beside SDPA's (lab script, 2026-12-03):
why train_gpt.py's step is ~1 ms slower with tessel than with SDPA although its attention
kernels are faster. Times per iteration (o = attn(q, k, v); o.backward(do)), tiny shapes
(host-bound) and train_gpt's (B8 H8 N1k D64 bf16, causal), then a torch.profiler table of the
tessel iterations by self CPU time.
    PYTHONPATH=... python3 overhead.py
"""
import time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import tessel

F = torch.nn.functional.scaled_dot_product_attention


def sdpa(q, k, v):
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return F(q, k, v, is_causal=True)


def tess(q, k, v):
    return tessel.attention(q, k, v, causal=True)


def per_iter(fn, shape, iters=200):
    q, k, v = (torch.randn(*shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    do = torch.randn(*shape, device="cuda", dtype=torch.bfloat16)
    for _ in range(10):
        fn(q, k, v).backward(do)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(iters):
        fn(q, k, v).backward(do)
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / iters * 1e6


for shape in ((1, 1, 64, 64), (8, 8, 1024, 64)):
    for name, fn in (("sdpa", sdpa), ("tessel", tess)):
        print(f"{name} {shape}: {per_iter(fn, shape):.1f} us / iteration", flush=True)

q, k, v = (torch.randn(1, 1, 64, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
           for _ in range(3))
do = torch.randn(1, 1, 64, 64, device="cuda", dtype=torch.bfloat16)
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
    for _ in range(50):
        tess(q, k, v).backward(do)
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))

import cProfile
import pstats
pr = cProfile.Profile()
pr.enable()
for _ in range(200):
    tess(q, k, v).backward(do)
torch.cuda.synchronize()
pr.disable()
pstats.Stats(pr).sort_stats("tottime").print_stats(30)
