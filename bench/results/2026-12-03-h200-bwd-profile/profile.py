"""Per-kernel times of tessel.attention_backward beside FA2's (torch.profiler), d128 fp16, b·n = 16k.

    PYTHONPATH=build/python python3 bench/results/2026-12-03-h200-bwd-profile/profile.py
"""
import torch
import tessel
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

F = torch.nn.functional.scaled_dot_product_attention
gen = torch.Generator(device="cuda").manual_seed(0)
for D, n in ((128, 16384), (128, 4096), (64, 16384)):
    H, B = 2048 // D, max(1, 16384 // n)
    for causal in (False, True):
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
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(10):
                    fn()
                torch.cuda.synchronize()
            tot = {}
            for e in prof.events():
                if e.device_type == torch.autograd.DeviceType.CUDA:
                    tot[e.name] = tot.get(e.name, 0.0) + e.device_time_total / 10
            s = sum(tot.values())
            print(f"d{D} n{n} causal={causal} {name}: {s / 1000:.3f} ms on the GPU")
            for k_, t in sorted(tot.items(), key=lambda x: -x[1])[:6]:
                print(f"    {t / 1000:8.3f} ms  {k_[:90]}")
        del q, k, v, do, o, lse, leaves, out
