"""Run 4 probe: is the persistent kernels' loss on uneven tiles (causal, ALiBi with a block mask)
their schedule or their code? The same calls timed one program a tile, persistent on one
program an SM (grid.greedy_schedule), and persistent on one program a tile (every program's
schedule one tile: the persistent kernel's code with the hardware's scheduling).

    PYTHONPATH=<bundle>/python python3 schedule_probe.py   (from test/gpu, for bench_decode)
"""
import sys

import torch

sys.path.insert(0, ".")
from bench_decode import make_timer, set_persistent  # noqa: E402

import tessel  # noqa: E402
from tessel import grid  # noqa: E402

timed, timer = make_timer(torch)
dev = "cuda"
B, H, N, D = 4, 16, 8192, 128
gen = torch.Generator(device=dev).manual_seed(0)
q, k, v = (torch.randn(B, H, N, D, device=dev, dtype=torch.float16, generator=gen)
           for _ in range(3))
slopes = torch.tensor([2.0 ** (-8.0 * (i + 1) / H) for i in range(H)], device=dev)


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def alibi(score, b, h, q_idx, kv_idx):
    return score + slopes[h] * (kv_idx - q_idx)


bm = tessel.block_mask(causal, None, None, N, N, device=dev)
real_greedy = grid.greedy_schedule


def one_each(costs, programs):
    import numpy as np
    n = len(costs)
    return np.arange(n, dtype=np.int32), np.arange(n + 1, dtype=np.int32)


def run(label, fn, flops):
    ms = timed(fn)
    print(f"{label:>40} {flops / ms / 1e9:8.1f} TFLOP/s", flush=True)


for name, call, flops in [
        ("alibi block mask", lambda: tessel.attention(q, k, v, score_mod=alibi, mask_mod=causal,
                                                      block_mask=bm), 2.0 * B * H * N * N * D),
        ("dense causal 8k", lambda: tessel.attention(q, k, v, causal=True), 2.0 * B * H * N * N * D)]:
    set_persistent(False)
    run(f"{name}: one a tile", call, flops)
    set_persistent(True)
    run(f"{name}: persistent, greedy", call, flops)
    # Every program one tile: patch the schedule and the program count.
    tessel_attention = sys.modules["tessel.attention"]
    tessel_blocksparse = sys.modules["tessel.blocksparse"]
    tessel_attention.greedy_schedule = tessel_blocksparse.greedy_schedule = one_each
    import tessel.serving_decode as sd
    real_sms = sd.num_sms
    sd.num_sms = lambda q: 1 << 30
    bm.__dict__.pop("_schedules", None)
    tessel_attention._schedules.clear()
    set_persistent(True)
    run(f"{name}: persistent, a program a tile", call, flops)
    tessel_attention.greedy_schedule = tessel_blocksparse.greedy_schedule = real_greedy
    sd.num_sms = real_sms
    bm.__dict__.pop("_schedules", None)
    tessel_attention._schedules.clear()
