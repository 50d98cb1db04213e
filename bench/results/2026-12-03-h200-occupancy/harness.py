"""Why tessel-run's speed table and the Python benchmarks disagree at d128 (2026-12-03 lab script).

Times one shape (fp16, B4 H16 N4096 D128 and B1 H16 N16384, non-causal) four ways for tessel
(blocks 64x64 and 128x128), cuDNN and FA2: triton do_bench median (L2 flushed, back to back),
sync-per-call CUDA events (tessel-run's and sdpa_tflops' method), and tessel-run itself.
    PYTHONPATH=... python3 harness.py --tessel-run BIN
"""
import argparse, json, os, pathlib, statistics, subprocess, sys, tempfile, time
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "test/gpu"))
import torch, tessel
from triton.testing import do_bench
from attention_case import run_case
from torch.nn.attention import SDPBackend, sdpa_kernel

ap = argparse.ArgumentParser(); ap.add_argument("--tessel-run"); ap.add_argument("--json")
a = ap.parse_args()
F = torch.nn.functional.scaled_dot_product_attention

def synced(fn, n=20):
    for _ in range(3): fn()
    t = []
    for _ in range(n):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); torch.cuda.synchronize(); t.append(s.elapsed_time(e))
    return statistics.median(t)

def b2b(fn, n=100):
    for _ in range(3): fn()
    torch.cuda.synchronize(); ev = []
    for _ in range(n):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); ev.append((s, e))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in ev)

rows = []
warm = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
t0 = time.time()
while time.time() - t0 < 1: warm @ warm
for B, N in ((4, 4096), (1, 16384)):
    H, D = 16, 128
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    flops = 4 * B * H * N * N * D
    fns = {"tessel64": lambda: tessel.attention(q, k, v, block_m=64, block_n=64),
           "tessel128": lambda: tessel.attention(q, k, v, block_m=128, block_n=128)}
    def sd(be):
        def f():
            with sdpa_kernel(be):
                return F(q, k, v)
        return f
    fns["cudnn"] = sd(SDPBackend.CUDNN_ATTENTION); fns["fa2"] = sd(SDPBackend.FLASH_ATTENTION)
    for rnd in range(2):
        for name, fn in fns.items():
            r = {"B": B, "N": N, "round": rnd, "who": name}
            for how, t in (("do_bench", lambda: do_bench(fn, warmup=25, rep=100, return_mode="median")),
                           ("synced20", lambda: synced(fn)), ("b2b100", lambda: b2b(fn))):
                ms = t(); r[how] = flops / ms / 1e9
            rows.append(r); print(json.dumps(r), flush=True)
        if a.tessel_run:
            with tempfile.TemporaryDirectory() as tmp:
                for bm, bn in ((64, 64), (128, 128)):
                    rr = run_case(a.tessel_run, pathlib.Path(tmp), "f16", "none", B, H, H, N, N, D, bm, bn,
                                  codegen="wgmma", repeats=20, reference=False)
                    r = {"B": B, "N": N, "round": rnd, "who": f"tessel-run{bm}x{bn}",
                         "tessel-run": flops / rr["median_ms"] / 1e9 if rr.get("median_ms") else rr.get("stderr", "")[-200:]}
                    rows.append(r); print(json.dumps(r), flush=True)
if a.json: json.dump(rows, open(a.json, "w"), indent=1)

# The backward's host-side Δ (torch) at d128 n16k, b1 h16: what it costs beside the programs.
o, do = (torch.randn(1, 16, 16384, 128, device="cuda", dtype=torch.float16) for _ in range(2))
dlse = torch.zeros(1, 16, 16384, device="cuda")
ms = do_bench(lambda: (o.float() * do.float()).sum(-1) - dlse, warmup=25, rep=100, return_mode="median")
print(json.dumps({"delta_torch_ms": ms}), flush=True)
