"""Kernel blocks for block masks of short rows (issue 13's document mask): tessel alone on
bench_block_mask's cases (B4 H16 N8k d128 fp16, 128x128 mask blocks built once), each case
timed at the default kernel blocks and at 64x128, 128x64, 64x64, interleaved over three rounds
in one process (do_bench median per call; the block shapes are per-call arguments, so one
process holds them all). Prints TFLOP/s per round and the median ratio to the default.

    cd test/gpu && PYTHONPATH=<bundle>/python python3 ../../bench/results/2026-12-04-h200-s19/ab_blocks.py OUT.json
"""
import json
import statistics
import sys

import torch

sys.path.insert(0, ".")
from bench_block_mask import allowed_pairs, make_cases  # noqa: E402
from bench_decode import make_timer  # noqa: E402

import tessel  # noqa: E402
from tessel import language as tl  # noqa: E402

timed, timer = make_timer(torch)
dt = torch.float16
gen = torch.Generator(device="cuda").manual_seed(0)
B, H, N, D = 4, 16, 8192, 128
cases = make_cases(torch, tl, B, H, N, gen)
q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=dt, generator=gen) for _ in range(3))
shapes = [None, (64, 128), (128, 64), (64, 64)]
calls = {}
for name in ("document", "window", "alibi", "prefix_lm"):
    mask_mod, score_t, _, per_batch = cases[name]
    flops = 4.0 * D * allowed_pairs(torch, mask_mod, B, N, per_batch) * H
    bm = tessel.block_mask(mask_mod, B if per_batch else None, None, N, N, device="cuda")
    want = None
    for s in shapes:
        bmn = dict(block_m=s[0], block_n=s[1]) if s else {}
        call = (lambda bmn=bmn, mask_mod=mask_mod, score_t=score_t, bm=bm: tessel.attention(
            q, k, v, score_mod=score_t, mask_mod=mask_mod, block_mask=bm, **bmn))
        try:
            out = call().float()
        except Exception as e:                          # a shape the kernel refuses
            print(name, s, "failed:", str(e).splitlines()[0][:160], flush=True)
            continue
        if want is None:
            want = out
        err = (out - want).abs().max().item()
        calls[(name, s)] = (call, flops, err)
rows = {f"{n} {s}": [] for (n, s) in calls}
for r in range(3):
    for (name, s), (call, flops, err) in calls.items():
        rows[f"{name} {s}"].append(flops / timed(call) / 1e9)
    print("round", r + 1, {k: round(v[-1], 1) for k, v in rows.items()}, flush=True)
report = {}
for (name, s), (call, flops, err) in calls.items():
    med = statistics.median(rows[f"{name} {s}"])
    base = statistics.median(rows[f"{name} None"])
    report[f"{name} {s}"] = dict(tflops=rows[f"{name} {s}"], median=med, vs_default=med / base,
                                 max_diff_vs_default=err)
    print(f"{name:>10} {str(s):>10} {med:7.1f} TFLOP/s  x{med / base:.3f}  diff {err:.1e}")
json.dump(dict(timer=timer, device=torch.cuda.get_device_name(0), rows=report),
          open(sys.argv[1], "w"), indent=1)
