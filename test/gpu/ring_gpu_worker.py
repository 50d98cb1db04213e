"""One rank of an NCCL ring for test_ring_gpu.py, started by torchrun.

    torchrun --standalone --nproc-per-node 2 test/gpu/ring_gpu_worker.py check OUT
    torchrun --standalone --nproc-per-node 2 test/gpu/ring_gpu_worker.py speed OUT

check: ring outputs (and gradients) on GPU shards against tessel.attention on the whole sequence
on one GPU, within twice that attention's own error against a float32 SDPA reference plus a
small slack. speed: a causal zigzag ring forward of TESSEL_RING_N rows (default 65536) against
tessel.attention on one GPU over the same whole sequence: the scaling efficiency
t_1 / (W · t_W) and the peak memory of each rank. Each rank writes OUT/<mode>-rank<R>.json.
"""
import datetime
import json
import os
import pathlib
import sys
import traceback

import torch
import torch.distributed as dist
import torch.nn.functional as F

import tessel
from bench_decode import time_back_to_back
from tessel.distributed import contiguous_shard, ring_attention, zigzag_shard

MODE, OUT = sys.argv[1], pathlib.Path(sys.argv[2])
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=300))
RANK, WORLD = dist.get_rank(), dist.get_world_size()
DEVICE = torch.device("cuda", int(os.environ.get("LOCAL_RANK", RANK)))
torch.cuda.set_device(DEVICE)


def inputs(B, H, Hkv, N, D, dtype, seed=0):
    g = torch.Generator(device=DEVICE).manual_seed(seed)       # the same on every rank
    return [torch.randn(B, h, N, D, device=DEVICE, dtype=dtype, generator=g)
            for h in (H, Hkv, Hkv)]


def shard(x, layout):
    fn = zigzag_shard if layout == "zigzag" else contiguous_shard
    return fn(x, RANK, WORLD).contiguous()


def err(a, b):
    return (a.float() - b.float()).abs().max().item()


def check_forward(dtype, causal, layout, N=8191, H=8, Hkv=2, D=128):
    q, k, v = inputs(1, H, Hkv, N, D, dtype)
    ref32 = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal,
                                           enable_gqa=True)
    one = tessel.attention(q, k, v, causal=causal, enable_gqa=True)
    o = ring_attention(*(shard(x, layout) for x in (q, k, v)), causal=causal, layout=layout,
                       enable_gqa=True)
    e_ring, e_one = err(o, shard(ref32, layout)), err(one, ref32)
    e_vs_one = err(o, shard(one, layout))
    ok = e_ring <= 2 * e_one + 1e-3
    return ok, (f"ring vs fp32 SDPA {e_ring:.2e}, one GPU vs fp32 SDPA {e_one:.2e}, "
                f"ring vs one GPU {e_vs_one:.2e}")


def check_backward(dtype, causal, layout, N=2047, H=4, Hkv=2, D=64):
    q, k, v = inputs(1, H, Hkv, N, D, dtype, seed=1)
    do = inputs(1, H, H, N, D, dtype, seed=2)[0]
    full = [x.clone().requires_grad_() for x in (q, k, v)]
    tessel.attention(*full, causal=causal, enable_gqa=True).backward(do)
    mine = [shard(x, layout).requires_grad_() for x in (q, k, v)]
    ring_attention(*mine, causal=causal, layout=layout, enable_gqa=True).backward(
        shard(do, layout))
    errs = [err(m.grad, shard(f.grad, layout)) / max(1.0, f.grad.abs().max().item())
            for m, f in zip(mine, full)]
    tol = 2e-2 if dtype == torch.bfloat16 else 4e-3
    return max(errs) < tol, f"relative dq {errs[0]:.2e}, dk {errs[1]:.2e}, dv {errs[2]:.2e}"


def run_checks():
    cases = {}
    for dtype in (torch.float16, torch.bfloat16):
        name = str(dtype).split(".")[1]
        cases[f"{name}-causal-zigzag"] = lambda d=dtype: check_forward(d, True, "zigzag")
        cases[f"{name}-causal-contiguous"] = lambda d=dtype: check_forward(d, True, "contiguous")
        cases[f"{name}-full"] = lambda d=dtype: check_forward(d, False, "contiguous")
        cases[f"{name}-backward-causal-zigzag"] = \
            lambda d=dtype: check_backward(d, True, "zigzag")
    results = {}
    for name, case in cases.items():
        try:
            ok, detail = case()
        except Exception:
            ok, detail = False, traceback.format_exc()
        results[name] = {"ok": ok, "detail": detail}
        dist.barrier()
    return results


def timed(fn, reps):
    return time_back_to_back(torch, fn, reps, before=dist.barrier)


def run_speed():
    N = int(os.environ.get("TESSEL_RING_N", 65536))
    B, H, D, dtype = 1, 32, 128, torch.float16
    q, k, v = (shard(x, "zigzag") for x in inputs(B, H, H, N, D, dtype))
    torch.cuda.reset_peak_memory_stats()
    ms_ring = timed(lambda: ring_attention(q, k, v, causal=True, layout="zigzag"), 5)
    peak = torch.cuda.max_memory_allocated() / 2**30
    ms_one = None
    del q, k, v
    dist.barrier()
    if RANK == 0:
        qf, kf, vf = inputs(B, H, H, N, D, dtype)
        ms_one = timed(lambda: tessel.attention(qf, kf, vf, causal=True), 5)
    flops = 4 * B * H * N * N * D / 2                       # causal: half the pairs
    result = {"N": N, "world": WORLD, "shape": [B, H, N, D], "dtype": "f16",
              "ms_ring": round(ms_ring, 3), "peak_memory_GiB": round(peak, 3),
              "ring_TFLOPs": round(flops / ms_ring / 1e9, 1),
              "device": torch.cuda.get_device_name()}
    if ms_one is not None:
        result.update(ms_one_gpu=round(ms_one, 3),
                      scaling_efficiency=round(ms_one / (WORLD * ms_ring), 3))
    dist.barrier()
    return result


try:
    data = run_checks() if MODE == "check" else run_speed()
    (OUT / f"{MODE}-rank{RANK}.json").write_text(json.dumps(data))
finally:
    dist.destroy_process_group()
