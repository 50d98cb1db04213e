"""The producer's copies through TMA (GpuOptions(tma_producer), tilegpu-tma-producer) against
the default cp.async producer, one configuration a process (the GpuOptions override must hold
before the first launcher is made): ab_tma.sh alternates processes. Each times tessel alone
(do_bench median) on dense d128 fp16 (b·n = 16k, h·d = 2048) and bench_block_mask's document
and window masks (B4 H16 N8k), and writes one JSON file.

    cd test/gpu && PYTHONPATH=<bundle>/python python3 ../../bench/results/2026-12-04-h200-s19/ab_tma.py tma|default OUT.json
"""
import json
import sys

import torch

sys.path.insert(0, ".")
from bench_block_mask import allowed_pairs, make_cases  # noqa: E402
from bench_decode import compile_with, make_timer  # noqa: E402

mode = sys.argv[1]
if mode == "tma":
    compile_with(tma_producer=True)

import tessel  # noqa: E402
from tessel import language as tl  # noqa: E402

timed, timer = make_timer(torch)
dt = torch.float16
gen = torch.Generator(device="cuda").manual_seed(0)
rows = {}
for n in (1024, 4096, 16384):
    B, H, D = 16384 // n, 16, 128
    q, k, v = (torch.randn(B, H, n, D, device="cuda", dtype=dt, generator=gen) for _ in range(3))
    for causal in (False, True):
        flops = 4 * B * H * n * n * D / (2 if causal else 1)
        call = lambda: tessel.attention(q, k, v, causal=causal)  # noqa: E731
        call()
        rows[f"d128 {n} {'causal' if causal else 'full'}"] = flops / timed(call) / 1e9
    del q, k, v
B, H, N, D = 4, 16, 8192, 128
cases = make_cases(torch, tl, B, H, N, gen)
q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=dt, generator=gen) for _ in range(3))
for name in ("document", "window"):
    mask_mod, score_t, _, per_batch = cases[name]
    flops = 4.0 * D * allowed_pairs(torch, mask_mod, B, N, per_batch) * H
    bm = tessel.block_mask(mask_mod, B if per_batch else None, None, N, N, device="cuda")
    call = lambda: tessel.attention(q, k, v, score_mod=score_t, mask_mod=mask_mod,  # noqa: E731
                                    block_mask=bm)
    call()
    rows[f"{name} (block mask)"] = flops / timed(call) / 1e9
print(json.dumps(dict(mode=mode, rows=rows)))
json.dump(dict(timer=timer, device=torch.cuda.get_device_name(0), mode=mode, rows=rows),
          open(sys.argv[2], "w"), indent=1)
