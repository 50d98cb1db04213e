"""Each fast backward program timed alone at each block pair (H200, fp16): the dQ program and the
key-rows dK/dV program at BLOCK_M × BLOCK_N in {64, 128}², b·n = 16k, h·d = 2048, beside FA2's
whole backward. Picks the blocks of each program separately (they need not be the same).

    python3 program_blocks.py OUT.json     # tessel importable; run from the repo root
"""
import json
import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[4] / "test" / "gpu"))
import torch
from bench_decode import make_timer, warm_up

import tessel
from tessel.backward import _config, attention_bwd_dkdv_keyrows, attention_bwd_dq
from tessel.grid import fold_grid

warm_up(torch)
timed, _ = make_timer(torch)
g = torch.Generator(device="cuda").manual_seed(0)
rows = []
for D in (64, 128):
    for n in (4096, 16384):
        B, H = max(1, 16384 // n), 2048 // D
        for causal in (False, True):
            q, k, v, do = (torch.randn(B, H, n, D, device="cuda", dtype=torch.float16,
                                       generator=g) for _ in range(4))
            o, lse = tessel.attention(q, k, v, causal=causal, return_lse=True)
            delta = (o.float() * do.float()).sum(-1)
            flops = 2.5 * 4 * B * H * n * n * D / (2 if causal else 1)
            leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
            from torch.nn.attention import SDPBackend, sdpa_kernel
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                out = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=causal)
            fa2 = timed(lambda: torch.autograd.grad(out, leaves, do, retain_graph=True))
            for bm, bn in ((64, 64), (64, 128), (128, 64), (128, 128)):
                shapes, scale, cx = _config(q, k, v, causal, None, None, None, False, bm, bn)
                dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
                try:
                    t_dq = timed(lambda: attention_bwd_dq[fold_grid(-(-n // bm), B * H)](
                        q, k, v, do, lse, delta, dq, n, n, H, H, scale, **cx))
                    t_kv = timed(lambda: attention_bwd_dkdv_keyrows[fold_grid(-(-n // bn), B * H)](
                        q, k, v, do, lse, delta, dk, dv, n, n, H, H, H, scale, **cx))
                except Exception as e:  # noqa: BLE001
                    print(D, n, causal, bm, bn, "failed:", str(e)[:120])
                    continue
                r = dict(d=D, n=n, causal=causal, bm=bm, bn=bn, dq_ms=t_dq, dkdv_ms=t_kv,
                         fa2_ms=fa2, fa2_tflops=flops / fa2 * 1e-9)
                rows.append(r)
                print(f"d{D} n{n} causal={causal:d} {bm}x{bn}: dq {t_dq:.3f} ms, dkdv "
                      f"{t_kv:.3f} ms, sum {t_dq + t_kv:.3f}; FA2 {fa2:.3f} ms "
                      f"({(t_dq + t_kv) and fa2 / (t_dq + t_kv):.2f}x)", flush=True)
json.dump(rows, open(sys.argv[1], "w"), indent=1)
