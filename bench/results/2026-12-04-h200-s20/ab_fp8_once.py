"""Lab script (twentieth session): FP8 d128 with and without Q from the producer
(GpuOptions(producer_once)), the two persistent kernels timed alternately in one process
(5 rounds each, do_bench medians, then the median of the rounds); the calls go through
tessel.attention with attention_fp8.persistent_kernel forced to one or the other."""
import statistics

import torch
from triton.testing import do_bench

import tessel
import tessel.attention_fp8 as f8

e4m3 = torch.float8_e4m3fn
for n in (1024, 2048, 4096):
    for causal in (False, True):
        B, H, D = 16384 // n, 16, 128
        q8, k8, v8 = (torch.randn(B, H, n, D, device="cuda").to(e4m3) for _ in range(3))
        times = {"once": [], "plain": []}
        for _ in range(5):
            for name, kernel in (("once", f8._fp8_persistent_once),
                                 ("plain", f8.fp8_persistent_kernel)):
                f8.persistent_kernel = lambda *a, k=kernel: k
                fn = lambda: tessel.attention(q8, k8, v8, causal=causal)   # noqa: E731
                fn()
                times[name].append(do_bench(fn, warmup=25, rep=100, return_mode="median"))
        once, plain = (statistics.median(times[k]) for k in ("once", "plain"))
        print(f"n={n:>5} causal={causal!s:>5}  once {once:.4f} ms  plain {plain:.4f} ms  "
              f"once/plain speed {plain / once:.3f}", flush=True)
