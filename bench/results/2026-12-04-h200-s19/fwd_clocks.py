"""Why cuDNN's forward key blocks are ~15 % cheaper at 1k-4k than at 16k while tessel's are not
(docs/bench/2026-12-04-h200-backward-bar.md, "Where the forward's time goes"): for d128 fp16
non-causal at b·n = 16k tokens, h·d = 2048, each implementation is run back to back for
`--seconds` while nvidia-smi samples the SM clock and the power every 50 ms; per (n, impl) it
prints the median clock and power under load, the GPU time per call (torch.profiler's sum of
kernel times), the kernels' names (which cuDNN kernel runs at each length) and TFLOP/s at
that time. Written in the nineteenth session, not yet run.

    cd test/gpu && PYTHONPATH=<bundle>/python python3 ../../bench/results/2026-12-04-h200-s19/fwd_clocks.py [--json OUT]
"""
import argparse
import json
import statistics
import subprocess
import time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

import tessel

F = torch.nn.functional.scaled_dot_product_attention


def kernels(fn, reps=10):
    """(GPU ms per call, {kernel name: ms per call}) from torch.profiler."""
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    per = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            per[e.name] = per.get(e.name, 0.0) + e.device_time_total / reps / 1000
    return sum(per.values()), per


def under_load(fn, seconds):
    """Median SM clock (MHz) and power (W) while `fn` runs back to back for `seconds`."""
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw",
                            "--format=csv,noheader,nounits", "-lms", "50"],
                           stdout=subprocess.PIPE, text=True)
    end = time.time() + seconds
    while time.time() < end:
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
    smi.terminate()
    rows = [line.split(",") for line in smi.communicate()[0].splitlines() if "," in line]
    # The first samples may predate the load: keep the second half.
    rows = rows[len(rows) // 2:] or rows
    return (statistics.median(float(r[0]) for r in rows),
            statistics.median(float(r[1]) for r in rows))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="*", default=[1024, 4096, 16384])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--json")
    args = ap.parse_args()
    gen = torch.Generator(device="cuda").manual_seed(0)
    report = []
    for n in args.lengths:
        B, H, D = 16384 // n, 16, 128
        q, k, v = (torch.randn(B, H, n, D, device="cuda", dtype=torch.float16, generator=gen)
                   for _ in range(3))
        flops = 4 * B * H * n * n * D

        def sdpa(backend):
            def call():
                with sdpa_kernel([backend]):
                    return F(q, k, v)
            return call
        impls = {"tessel": lambda: tessel.attention(q, k, v),
                 "cudnn": sdpa(SDPBackend.CUDNN_ATTENTION),
                 "fa2": sdpa(SDPBackend.FLASH_ATTENTION)}
        for name, fn in impls.items():
            fn()
            ms, per = kernels(fn)
            clock, power = under_load(fn, args.seconds)
            row = dict(n=n, impl=name, gpu_ms=ms, tflops=flops / ms / 1e9, sm_mhz=clock,
                       power_w=power, kernels={k: round(t, 4) for k, t in per.items()})
            report.append(row)
            top = max(per, key=per.get)
            print(f"n={n:>6} {name:>7}: {row['tflops']:7.1f} TFLOP/s  {clock:6.0f} MHz  "
                  f"{power:5.0f} W  {ms:.3f} ms  [{top[:90]}]", flush=True)
        del q, k, v
    if args.json:
        json.dump(report, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
