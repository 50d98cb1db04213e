"""Run 5: persistent kernels against one program a tile, interleaved (A B A B A B) so that the
H200's clock drift between machine sessions and within one (docs/bench/...-separate-bias.md)
falls on both alike; medians of three do_bench medians each. Dense d128 fp16 (b·n = 16k,
h·d = 2048, bench_head_dims' shapes) and bench_block_mask's masks (B4 H16 N8k).

    cd test/gpu && PYTHONPATH=<bundle>/python python3 ../../bench/results/2026-12-03-h200-persistent/ab.py
"""
import json
import statistics
import sys

import torch

sys.path.insert(0, ".")
from bench_block_mask import allowed_pairs, make_cases  # noqa: E402
from bench_decode import make_timer, set_persistent  # noqa: E402

import tessel  # noqa: E402
from tessel import language as tl  # noqa: E402

timed, timer = make_timer(torch)
dt = torch.float16
gen = torch.Generator(device="cuda").manual_seed(0)
rows = []


def ab(label, call, flops):
    got = {True: [], False: []}
    for _ in range(3):
        for on in (True, False):
            set_persistent(on)
            call()
            got[on].append(flops / timed(call) / 1e9)
    p, o = statistics.median(got[True]), statistics.median(got[False])
    rows.append(dict(case=label, persistent=got[True], one_a_tile=got[False]))
    print(f"{label:>24} persistent {p:7.1f}  one a tile {o:7.1f}  {p / o:5.3f}  "
          f"(spread {min(got[True]):.0f}-{max(got[True]):.0f} / "
          f"{min(got[False]):.0f}-{max(got[False]):.0f})", flush=True)


for n in (1024, 2048, 4096, 16384):
    B, H, D = 16384 // n, 16, 128
    q, k, v = (torch.randn(B, H, n, D, device="cuda", dtype=dt, generator=gen) for _ in range(3))
    for causal in (False, True):
        flops = 4 * B * H * n * n * D / (2 if causal else 1)
        ab(f"d128 {n} {'causal' if causal else 'full'}",
           lambda: tessel.attention(q, k, v, causal=causal), flops)
    del q, k, v

B, H, N, D = 4, 16, 8192, 128
cases = make_cases(torch, tl, B, H, N, gen)
q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=dt, generator=gen) for _ in range(3))
for name in ("document", "window", "alibi", "prefix_lm", "block_sparse", "softcap"):
    mask_mod, score_t, _, per_batch = cases[name]
    flops = 4.0 * D * allowed_pairs(torch, mask_mod, B, N, per_batch) * H
    bm = tessel.block_mask(mask_mod, B if per_batch else None, None, N, N, device="cuda")
    ab(f"{name} (block mask)",
       lambda: tessel.attention(q, k, v, score_mod=score_t, mask_mod=mask_mod, block_mask=bm),
       flops)
json.dump(dict(timer=timer, device=torch.cuda.get_device_name(0), rows=rows),
          open(sys.argv[1] if len(sys.argv) > 1 else "/dev/null", "w"), indent=1)
