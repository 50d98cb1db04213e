"""The d64 backward's blocks on sm_90a (issue 11's follow-up: d64 at 0.93-0.99x FA2): the
default (dQ and key-rows programs at 64x64) against a 128x128 dQ program (two consumer
warpgroups and a producer, as d128's default), a 128x64 dQ program and a 64x128 key-rows
program; b.n = 16k, h.d = 2048, fp16, n 4k and 16k, causal and not. The tables
(backward.FAST_DQ_BLOCKS_SM90, FAST_KEYROWS_BLOCKS_SM90) are read per call, so one process
times every variant, interleaved over three rounds, beside FA2's backward; gradients checked
against the default's.

    cd test/gpu && PYTHONPATH=<bundle>/python python3 ../../bench/results/2026-12-04-h200-s19/ab_bwd64.py OUT.json
"""
import json
import statistics
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, ".")
from bench_decode import make_timer  # noqa: E402

import tessel  # noqa: E402
import tessel.backward as tb  # noqa: E402

timed, timer = make_timer(torch)
variants = {"default": ({}, {}), "dq128x128": ({64: (128, 128)}, {}),
            "dq128x64": ({64: (128, 64)}, {}), "kr64x128": ({}, {64: (64, 128)})}
D, H = 64, 32
gen = torch.Generator(device="cuda").manual_seed(0)
F = torch.nn.functional.scaled_dot_product_attention
report = {}
for n in (4096, 16384):
    B = 16384 // n
    for causal in (False, True):
        q, k, v, do = (torch.randn(B, H, n, D, device="cuda", dtype=torch.float16,
                                   generator=gen) for _ in range(4))
        flops = 2.5 * 4 * B * H * n * n * D / (2 if causal else 1)
        o, lse = tessel.attention(q, k, v, causal=causal, return_lse=True)
        leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            out = F(*leaves, is_causal=causal)

        def fa2():
            return torch.autograd.grad(out, leaves, do, retain_graph=True)

        def ours(name):
            tb.FAST_DQ_BLOCKS_SM90 = {128: (128, 128), **variants[name][0]}
            tb.FAST_KEYROWS_BLOCKS_SM90 = dict(variants[name][1])
            return tessel.attention_backward(q, k, v, o, lse, do, causal=causal)
        want = ours("default")
        cell = {}
        for name in variants:
            try:
                got = ours(name)
            except Exception as e:                      # noqa: BLE001 (a shape refused)
                print(n, causal, name, "failed:", str(e).splitlines()[0][:160], flush=True)
                continue
            diff = max(((a.float() - b.float()).abs().max() / b.float().abs().max()).item()
                       for a, b in zip(got, want))
            cell[name] = dict(diff=diff, tflops=[])
        cell["fa2"] = dict(tflops=[])
        for r in range(3):
            for name in cell:
                if name == "fa2":
                    ms = timed(fa2)
                else:
                    ms = timed(lambda name=name: ours(name))
                cell[name]["tflops"].append(flops / ms / 1e9)
        base = statistics.median(cell["fa2"]["tflops"])
        line = []
        for name, c in cell.items():
            c["median"] = statistics.median(c["tflops"])
            c["vs_fa2"] = c["median"] / base
            line.append(f"{name} {c['median']:.1f} ({c['vs_fa2']:.3f})")
        print(f"d64 n{n} causal={causal}: " + ", ".join(line), flush=True)
        report[f"{n} {causal}"] = cell
        del q, k, v, do, o, lse, leaves, out
json.dump(dict(timer=timer, device=torch.cuda.get_device_name(0), rows=report),
          open(sys.argv[1], "w"), indent=1)
