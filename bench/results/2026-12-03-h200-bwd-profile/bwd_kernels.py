"""Where the backward's time goes: per-kernel GPU time (torch.profiler) beside the wall time of a
call, tessel.attention_backward and FA2 (SDPA's flash backend), d128/d64 fp16, b·n = 16k tokens.

    PYTHONPATH=build/python python3 bench/results/2026-12-03-h200-bwd-profile/bwd_kernels.py

Per case and implementation: `host` the Python time of one call without waiting (a call that
synchronises shows its GPU time here), `wall` the CUDA-event time per call over 20 calls back to
back (no L2 flush), `do_bench` triton.testing.do_bench's median (L2 flushed before each call),
and the profiler's sum of kernel times per call after 3 calls and after 2 s of calls.
"""
import time

import torch
import tessel
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

F = torch.nn.functional.scaled_dot_product_attention


def kernel_ms(fn, reps=10):
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    tot = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            tot[e.name] = tot.get(e.name, 0.0) + e.device_time_total / reps / 1000
    return sum(tot.values()), tot


def wall_ms(fn, reps=20):
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(reps):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / reps


def host_ms(fn, reps=5):
    torch.cuda.synchronize()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t.append((time.perf_counter() - t0) * 1e3)
        torch.cuda.synchronize()
    return sorted(t)[len(t) // 2]


gen = torch.Generator(device="cuda").manual_seed(0)
for D, n, causal in ((128, 16384, True), (128, 16384, False), (128, 4096, True), (64, 16384, True)):
    H, B = 2048 // D, max(1, 16384 // n)
    q, k, v, do = (torch.randn(B, H, n, D, device="cuda", dtype=torch.float16, generator=gen)
                   for _ in range(4))
    o, lse = tessel.attention(q, k, v, causal=causal, return_lse=True)
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        out = F(*leaves, is_causal=causal)
    runs = {
        "tessel": lambda: tessel.attention_backward(q, k, v, o, lse, do, causal=causal),
        "fa2": lambda: torch.autograd.grad(out, leaves, do, retain_graph=True),
    }
    for name, fn in runs.items():
        for _ in range(3):
            fn()
        cold, _ = kernel_ms(fn)
        t_end = time.perf_counter() + 2.0
        while time.perf_counter() < t_end:
            fn()
        hot, per = kernel_ms(fn)
        w = wall_ms(fn)
        db = triton.testing.do_bench(fn, return_mode="median")
        h = host_ms(fn)
        print(f"d{D} n{n} causal={causal} {name:6}: host {h:.3f}  wall {w:.3f}  do_bench {db:.3f}"
              f"  kernels cold {cold:.3f} hot {hot:.3f} ms", flush=True)
        for k_, t in sorted(per.items(), key=lambda x: -x[1])[:4]:
            print(f"      {t:8.3f} ms  {k_[:90]}")
    del q, k, v, do, o, lse, leaves, out

# [B, N, H, D] views (FlashAttention's layout): the backward reading them in place
# (backward.STRIDED_BACKWARD) beside copying them first.
import tessel.backward as tb  # noqa: E402
for D in (64, 128):
    B, N, H = 4, 4096, 2048 // D
    base = [torch.randn(B, N, H, D, device="cuda", dtype=torch.float16, generator=gen)
            for _ in range(4)]
    q, k, v, do = (x.transpose(1, 2) for x in base)
    o, lse = tessel.attention(q, k, v, causal=True, return_lse=True)
    cells = []
    for strided in (True, False):
        tb.STRIDED_BACKWARD = strided
        ms = triton.testing.do_bench(
            lambda: tessel.attention_backward(q, k, v, o, lse, do, causal=True),
            return_mode="median")
        cells.append(f"{'in place' if strided else 'copied'} {ms:.3f} ms")
    print(f"BSHD views d{D} B{B} N{N} H{H} causal: " + ", ".join(cells), flush=True)
