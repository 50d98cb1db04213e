"""Ranks of a gloo ring for test_ring_attention.py, each set up the way torchrun sets one up.

    python3 ring_worker.py OUT              one rank; the environment says which (RANK,
                                            WORLD_SIZE, MASTER_ADDR, MASTER_PORT: env://), so
                                            `torchrun --nproc-per-node 3 ring_worker.py OUT` works
    python3 ring_worker.py OUT --world W    W ranks on this host: forked from this process after
                                            torch and tessel are imported (importing torch takes
                                            5-10 s per process on the 2-core CI machine), each
                                            given that environment, on a free port

Each rank writes OUT/rank<RANK>.json, one entry per case: {"ok": bool, "detail": str,
"seconds": float}. Every rank builds the same whole q, k, v from a seed, runs
tessel.distributed.ring_attention on its shard, and checks its rows of the output (and of dq,
dk, dv) against a float64 torch reference on the whole sequence, sharded the same way.
"""
import datetime
import json
import math
import multiprocessing
import os
import socket
import sys
import time
import traceback

import numpy as np
import torch
import torch.distributed as dist

import tessel
from tessel.distributed import (contiguous_shard, ring_attention, zigzag_shard,
                                zigzag_unshard)

RANK = WORLD = UNEVEN = None     # set by run_rank
D = 16
EVEN = 48                        # a length every world size here divides, twice over


def uneven(world):
    """A length that neither the world size nor twice it divides."""
    return {2: 27, 3: 31, 4: 37}.get(world, 29)


def reference(q, k, v, causal, scale=None):
    """float64 attention and its LSE on the whole sequence (torch; autograd for gradients)."""
    H, Hkv = q.shape[1], k.shape[1]
    k = k.repeat_interleave(H // Hkv, dim=1)
    v = v.repeat_interleave(H // Hkv, dim=1)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(-1, -2) * scale
    if causal:
        n = s.shape[-1]
        idx = torch.arange(n)
        s = s.masked_fill(idx[:, None] < idx[None, :], float("-inf"))
    return torch.softmax(s, dim=-1) @ v, torch.logsumexp(s, dim=-1)


def inputs(seed, H, Hkv, N, dtype=torch.float32, B=1):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, N, D, generator=g, dtype=torch.float64)
    k = torch.randn(B, Hkv, N, D, generator=g, dtype=torch.float64)
    v = torch.randn(B, Hkv, N, D, generator=g, dtype=torch.float64)
    return q, k, v


def shard(x, layout, rank, world):
    if layout == "zigzag":
        return zigzag_shard(x, rank, world, dim=2).contiguous()
    return contiguous_shard(x, rank, world, dim=2).contiguous()


def err(out, ref):
    """Max absolute error, relative to the reference's largest magnitude (at least 1)."""
    ref = ref.to(torch.float64)
    return float((out.to(torch.float64) - ref).abs().max() / max(1.0, float(ref.abs().max())))


def forward_case(H, Hkv, N, causal, layout, dtype=torch.float32, tol=2e-6, group=None,
                 seed=0, B=1):
    rank = dist.get_rank(group)
    world = dist.get_world_size(group)
    q, k, v = inputs(seed, H, Hkv, N, B=B)
    ref_o, ref_lse = reference(q, k, v, causal)
    local = [shard(x, layout, rank, world).to(dtype) for x in (q, k, v)]
    o, lse = ring_attention(*local, causal=causal, group=group, layout=layout,
                            enable_gqa=H != Hkv, return_lse=True)
    assert o.dtype == dtype and o.shape == local[0].shape, (o.dtype, o.shape)
    assert lse.dtype == torch.float32 and lse.shape == local[0].shape[:3]
    e_o = err(o, shard(ref_o, layout, rank, world))
    e_lse = err(lse, shard(ref_lse, layout, rank, world))
    ok = e_o < tol and e_lse < tol
    return ok, f"rank {rank}/{world}: o error {e_o:.2e}, lse error {e_lse:.2e} (tol {tol:g})"


def backward_case(H, Hkv, N, causal, layout, use_lse, tol=2e-5, seed=1):
    """Gradients of sum(o·g) (+ sum(lse·h)) against float64 autograd on the whole sequence."""
    rank, world = RANK, WORLD
    q, k, v = inputs(seed, H, Hkv, N)
    gen = torch.Generator().manual_seed(seed + 100)
    g = torch.randn(1, H, N, D, generator=gen, dtype=torch.float64)
    h = torch.randn(1, H, N, generator=gen, dtype=torch.float64)
    full = [x.clone().requires_grad_() for x in (q, k, v)]
    ref_o, ref_lse = reference(*full, causal)
    loss = (ref_o * g).sum() + ((ref_lse * h).sum() if use_lse else 0.0)
    loss.backward()
    local = [shard(x, layout, rank, world).float().requires_grad_() for x in (q, k, v)]
    o, lse = ring_attention(*local, causal=causal, layout=layout, enable_gqa=H != Hkv,
                            return_lse=True)
    assert o.grad_fn is not None
    my_loss = (o * shard(g, layout, rank, world).float()).sum()
    if use_lse:
        my_loss = my_loss + (lse * shard(h, layout, rank, world).float()).sum()
    my_loss.backward()
    errs = [err(x.grad, shard(r.grad, layout, rank, world)) for x, r in zip(local, full)]
    e_o = err(o.detach(), shard(ref_o.detach(), layout, rank, world))
    ok = max(errs) < tol and e_o < tol
    return ok, (f"rank {rank}/{world}: o {e_o:.2e}, dq {errs[0]:.2e}, dk {errs[1]:.2e}, "
                f"dv {errs[2]:.2e} (tol {tol:g})")


def world_one_case(causal, dtype):
    """A group of one rank (each rank its own): ring_attention equals tessel.attention."""
    groups = [dist.new_group([r]) for r in range(WORLD)]    # collective: every rank makes all
    q, k, v = (x.to(dtype) for x in inputs(3 + RANK, 2, 2, 29))
    o, lse = ring_attention(q, k, v, causal=causal, group=groups[RANK], return_lse=True)

    def host(t):
        return t.view(torch.int16).numpy().view(np.uint16) if dtype == torch.bfloat16 \
            else t.numpy()
    o_ref, lse_ref = tessel.attention(host(q), host(k), host(v), causal=causal,
                                      return_lse=True)
    same = np.array_equal(host(o), o_ref) and np.array_equal(lse.numpy(), lse_ref)
    return same, f"rank {RANK} alone: identical to tessel.attention: {same}"


def subgroup_case():
    """A ring over a group that is not the world, in an order that is not the world's: ranks
    (3, 1, 2) of four. Group rank i is world rank members[i]."""
    members = [3, 1, 2]
    group = dist.new_group(members)
    if RANK not in members:
        return True, f"rank {RANK}: not in the group"
    return forward_case(2, 2, 23, True, "zigzag", group=group, seed=7)


def bad_zigzag_case():
    """Shards that are not zigzag shards of one sequence: every rank raises the same error."""
    q, k, v = (shard(x, "zigzag", RANK, WORLD).float() for x in inputs(0, 1, 1, UNEVEN))
    if RANK == 0:       # 2W rows more: each chunk of the longer sequence grows by one row only
        q, k, v = (torch.cat([x, x[:, :, :2 * WORLD]], dim=2) for x in (q, k, v))
    try:
        ring_attention(q, k, v, causal=True, layout="zigzag")
    except ValueError as e:
        ok = "zigzag shard" in str(e)
        # The group is still usable: no message was left in flight.
        dist.barrier()
        return ok, f"rank {RANK}: {e}"
    return False, f"rank {RANK}: no error"


def round_trip_case():
    x = torch.arange(3 * UNEVEN * 2).reshape(3, UNEVEN, 2)
    shards = [zigzag_shard(x, r, WORLD, dim=1) for r in range(WORLD)]
    ok = torch.equal(zigzag_unshard(shards, dim=1), x)
    return ok, f"{[tuple(s.shape) for s in shards]}"


def cases(world):
    table = {
        "full-contiguous": lambda: forward_case(2, 2, UNEVEN, False, "contiguous"),
        "full-zigzag": lambda: forward_case(2, 2, UNEVEN, False, "zigzag"),
        "causal-contiguous": lambda: forward_case(2, 2, UNEVEN, True, "contiguous"),
        "causal-zigzag": lambda: forward_case(2, 2, UNEVEN, True, "zigzag"),
        "causal-zigzag-even": lambda: forward_case(1, 1, EVEN, True, "zigzag", B=2),
        "gqa-full": lambda: forward_case(4, 2, UNEVEN, False, "contiguous"),
        "gqa-causal-zigzag": lambda: forward_case(2, 1, UNEVEN, True, "zigzag"),
        "f16-causal-zigzag": lambda: forward_case(2, 2, UNEVEN, True, "zigzag", torch.float16,
                                                  tol=4e-3),
        "bf16-causal-contiguous": lambda: forward_case(2, 1, UNEVEN, True, "contiguous",
                                                       torch.bfloat16, tol=3e-2),
        "backward-causal-zigzag-gqa": lambda: backward_case(2, 1, UNEVEN, True, "zigzag", False),
        "backward-causal-contiguous-lse": lambda: backward_case(1, 1, UNEVEN, True, "contiguous",
                                                                True),
        "backward-full-gqa": lambda: backward_case(2, 1, UNEVEN, False, "contiguous", False),
        "world-one": lambda: world_one_case(True, torch.float32),
        "world-one-bf16": lambda: world_one_case(False, torch.bfloat16),
        "bad-zigzag-shards": bad_zigzag_case,
        "zigzag-round-trip": round_trip_case,
    }
    if world == 4:
        table["subgroup"] = subgroup_case
    return table


def run_rank(out):
    global RANK, WORLD, UNEVEN
    RANK = int(os.environ["RANK"])
    WORLD = int(os.environ["WORLD_SIZE"])
    UNEVEN = uneven(WORLD)
    dist.init_process_group("gloo", init_method="env://",
                            timeout=datetime.timedelta(seconds=90))
    results = {}
    for name, case in cases(WORLD).items():
        start = time.perf_counter()
        try:
            ok, detail = case()
        except Exception:
            ok, detail = False, traceback.format_exc()
        results[name] = {"ok": bool(ok), "detail": detail,
                         "seconds": round(time.perf_counter() - start, 3)}
        with open(os.path.join(out, f"rank{RANK}.json"), "w") as f:
            json.dump(results, f)
    dist.barrier()
    dist.destroy_process_group()


def _forked_rank(rank, world, port, out):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    run_rank(out)


def launch(out, world):
    """Forks `world` ranks; exit status 0 when every rank exits 0."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_forked_rank, args=(r, world, port, out)) for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    codes = [p.exitcode for p in procs]
    if any(codes):
        print(f"exit codes of the ranks: {codes}", file=sys.stderr)
    return 1 if any(codes) else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[2] == "--world":
        sys.exit(launch(sys.argv[1], int(sys.argv[3])))
    run_rank(sys.argv[1])
