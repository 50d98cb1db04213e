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
dk, dv) against a float64 torch reference on the whole sequence, sharded the same way. The
cases with a score_mod / mask_mod (mod_cases, world sizes 2 and 3) check against
tessel.reference's float64 numpy attention and backward on the whole sequence, the mods
written for global positions.
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
from tessel import language as tl
from tessel.distributed import (contiguous_shard, ring_attention, zigzag_shard,
                                zigzag_unshard)
from tessel.reference import reference_attention, reference_attention_backward

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
    """This rank's shard of x (a torch tensor, contiguous, or a numpy array)."""
    if layout == "zigzag":
        x = zigzag_shard(x, rank, world, dim=2)
    else:
        x = contiguous_shard(x, rank, world, dim=2)
    return x if isinstance(x, np.ndarray) else x.contiguous()


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


# score_mod / mask_mod: q_idx and kv_idx are positions in the whole sequence ----------------------

CAP = 1.5
WINDOW = 6
PREFIX = 7


@tessel.jit
def alibi(score, b, h, q_idx, kv_idx):
    return score + tl.exp2(-(h + 1).to(tl.float32)) * (kv_idx - q_idx).to(tl.float32)


@tessel.jit
def softcap(score, b, h, q_idx, kv_idx):
    return CAP * tl.tanh(score / CAP)


@tessel.jit
def window(b, h, q_idx, kv_idx):
    return (q_idx - kv_idx < WINDOW) & (kv_idx - q_idx < WINDOW)


def prefix_lm(b, h, q_idx, kv_idx):                     # a plain function works too
    return (kv_idx < PREFIX) | (q_idx >= kv_idx)


@tessel.jit
def holes(b, h, q_idx, kv_idx):
    """Rows q % 5 == 2 see no key at all; the others a few around the diagonal, so that most
    steps of the ring see nothing for most rows."""
    return (q_idx % 5 != 2) & (q_idx - kv_idx < 3) & (kv_idx - q_idx < 3)


def document(doc):
    """A document mask over the whole sequence's ids (a captured numpy array)."""
    def document_mask(b, h, q_idx, kv_idx):
        return doc[q_idx] == doc[kv_idx]
    return document_mask


def np_document(doc):
    return lambda b, h, qi, ki: doc[qi] == doc[ki]


def document_ids(n):
    lengths = [5, 9, 3, 11] * (n // 28 + 1)
    return np.repeat(np.arange(len(lengths)), lengths)[:n].astype(np.int32)


# name -> (DSL mod, float64 numpy version, its derivative in the score: score_mods)
SCORE_MODS = {
    "alibi": (alibi, lambda s, b, h, qi, ki: s + 2.0 ** -(h + 1) * (ki - qi),
              lambda s, b, h, qi, ki: np.ones_like(s)),
    "softcap": (softcap, lambda s, b, h, qi, ki: CAP * np.tanh(s / CAP),
                lambda s, b, h, qi, ki: 1.0 - np.tanh(s / CAP) ** 2),
}
MASK_MODS = {
    "window": (window, lambda b, h, qi, ki: (qi - ki < WINDOW) & (ki - qi < WINDOW)),
    "prefix-lm": (prefix_lm, lambda b, h, qi, ki: (ki < PREFIX) | (qi >= ki)),
    "holes": (holes, lambda b, h, qi, ki: (qi % 5 != 2) & (qi - ki < 3) & (ki - qi < 3)),
}


def mods_of(score, mask, n):
    """(score_mod, mask_mod, numpy score, its derivative, numpy mask) for names; "document" is
    the document mask of a sequence of n rows."""
    sm, np_s, np_g = SCORE_MODS[score] if score else (None, None, None)
    if mask == "document":
        doc = document_ids(n)
        mm, np_m = document(doc), np_document(doc)
    else:
        mm, np_m = MASK_MODS[mask] if mask else (None, None)
    return sm, mm, np_s, np_g, np_m


def to_np(x):
    return x.detach().to(torch.float64).numpy()


def err_np(out, ref):
    """err() for numpy, where the reference may hold -inf (an LSE of a row that sees nothing):
    those must match exactly."""
    out = np.asarray(out, np.float64)
    if np.isnan(out).any():
        return float("inf")
    inf = np.isinf(ref)
    if (np.isinf(out) != inf).any() or (out[inf] != ref[inf]).any():
        return float("inf")
    if inf.all():
        return 0.0
    d = np.abs(out[~inf] - ref[~inf]).max()
    return float(d / max(1.0, float(np.abs(ref[~inf]).max())))


def mod_case(H, Hkv, N, causal, layout, score=None, mask=None, dtype=torch.float32, tol=2e-6,
             Nk=None, seed=11, flash=None):
    """The forward with mods against the whole sequence's float64 reference. `flash`:
    FlashAttention's window_size, softcap and alibi_slopes instead (any of them)."""
    rank, world = RANK, WORLD
    Nk = N if Nk is None else Nk
    q = inputs(seed, H, Hkv, N)[0]
    k, v = inputs(seed + 1, H, Hkv, Nk)[1:]
    sm, mm, np_s, _, np_m = mods_of(score, mask, max(N, Nk))
    if flash:
        (left, right), cap = flash.get("window_size", (-1, -1)), flash.get("softcap")
        slopes = flash.get("alibi_slopes")

        def np_s(s, b, h, qi, ki):
            s = cap * np.tanh(s / cap) if cap else s
            return s if slopes is None else s - float(slopes[h]) * np.abs(qi - ki)
        np_m = lambda b, h, qi, ki: ((ki >= qi - left) | (left < 0)) & (  # noqa: E731
            (ki <= qi + right) | (right < 0))
    ref_o, ref_lse = reference_attention(to_np(q), to_np(k), to_np(v), causal=causal,
                                         score=np_s, allowed=np_m, enable_gqa=H != Hkv)
    local = [shard(x, layout, rank, world).to(dtype) for x in (q, k, v)]
    o, lse = ring_attention(*local, causal=causal, layout=layout, score_mod=sm, mask_mod=mm,
                            enable_gqa=H != Hkv, return_lse=True, **(flash or {}))
    e_o = err_np(to_np(o), shard(ref_o, layout, rank, world))
    e_lse = err_np(lse.numpy(), shard(ref_lse, layout, rank, world))
    unseen = int(np.isneginf(shard(ref_lse, layout, rank, world)).sum())
    ok = e_o < tol and e_lse < tol
    return ok, (f"rank {rank}/{world}: o error {e_o:.2e}, lse error {e_lse:.2e} (tol {tol:g}; "
                f"{unseen} rows see no key)")


def mod_backward_case(H, Hkv, N, causal, layout, score=None, mask=None, use_lse=False,
                      tol=2e-5, seed=21, strided=False):
    """dq, dk, dv of sum(o·g) (+ sum(lse·h) over the rows that see a key) with mods, against
    tessel.reference's float64 backward on the whole sequence. `strided`: q, k and v are not
    contiguous (leaves whose head dim has stride n)."""
    rank, world = RANK, WORLD
    q, k, v = inputs(seed, H, Hkv, N)
    gen = torch.Generator().manual_seed(seed + 100)
    g = torch.randn(1, H, N, D, generator=gen, dtype=torch.float64)
    hl = torch.randn(1, H, N, generator=gen, dtype=torch.float64)
    sm, mm, np_s, np_g, np_m = mods_of(score, mask, N)
    gqa = H != Hkv
    args = dict(causal=causal, score=np_s, allowed=np_m, enable_gqa=gqa)
    ref_o, ref_lse = reference_attention(to_np(q), to_np(k), to_np(v), **args)
    seen = torch.from_numpy(np.isfinite(ref_lse))
    hl = torch.where(seen, hl, 0.0)                   # no gradient into an lse of -inf
    ref = reference_attention_backward(to_np(q), to_np(k), to_np(v), g.numpy(),
                                       score_grad=np_g, dlse=hl.numpy() if use_lse else None,
                                       **args)
    local = [shard(x, layout, rank, world).float() for x in (q, k, v)]
    if strided:
        local = [x.transpose(2, 3).contiguous().transpose(2, 3) for x in local]
        assert not any(x.is_contiguous() for x in local)
    local = [x.requires_grad_() for x in local]
    o, lse = ring_attention(*local, causal=causal, layout=layout, score_mod=sm, mask_mod=mm,
                            enable_gqa=gqa, return_lse=True)
    my_loss = (o * shard(g, layout, rank, world).float()).sum()
    if use_lse:
        my_seen = shard(seen, layout, rank, world)
        my_loss = my_loss + (torch.where(my_seen, lse, 0.0)
                             * shard(hl, layout, rank, world).float()).sum()
    my_loss.backward()
    errs = [err_np(to_np(x.grad), shard(r, layout, rank, world))
            for x, r in zip(local, ref)]
    e_o = err_np(to_np(o), shard(ref_o, layout, rank, world))
    ok = max(errs) < tol and e_o < tol
    return ok, (f"rank {rank}/{world}: o {e_o:.2e}, dq {errs[0]:.2e}, dk {errs[1]:.2e}, "
                f"dv {errs[2]:.2e} (tol {tol:g})")


def mod_world_one_case():
    """A group of one: ring_attention with mods is tessel.attention with them, to f32 rounding:
    the ring's wrappers place a shard's positions with a select, which keeps an affine bias such
    as ALiBi per element, where tessel.attention's kernel regroups it per row and per column
    (tile-separate-bias). Without mods the two are bit for bit the same (world-one)."""
    groups = [dist.new_group([r]) for r in range(WORLD)]
    q, k, v = inputs(5 + RANK, 2, 2, 29)
    doc = document_ids(29)
    o, lse = ring_attention(q.float(), k.float(), v.float(), causal=True, group=groups[RANK],
                            score_mod=alibi, mask_mod=document(doc), return_lse=True)
    o_ref, lse_ref = tessel.attention(*(x.float().numpy() for x in (q, k, v)), causal=True,
                                      score_mod=alibi, mask_mod=document(doc), return_lse=True)
    e_o = err_np(o.numpy(), o_ref)
    e_lse = err_np(lse.numpy(), lse_ref)
    ok = e_o < 1e-5 and e_lse < 1e-6
    return ok, (f"rank {RANK} alone, mods: o {e_o:.2e}, lse {e_lse:.2e} from tessel.attention "
                f"(tol 1e-5, 1e-6)")


def traces():
    """Traces held by the forward's and the backward's kernels, in this process."""
    from tessel.attention import attention_kernel
    from tessel.backward import attention_bwd_dkdv, attention_bwd_dq
    return [sum(len(c) for c in kern.cache.values())
            for kern in (attention_kernel, attention_bwd_dkdv, attention_bwd_dq)]


@tessel.jit
def fresh_bias(score, b, h, q_idx, kv_idx):         # used by no other case: its traces count
    return score - 0.125 * (q_idx - kv_idx).to(tl.float32)


@tessel.jit
def fresh_window(b, h, q_idx, kv_idx):
    return q_idx - kv_idx < 9


def no_recompile_case():
    """Every step runs its pair at other offsets, with the same kernel: W steps of equal shard
    pairs (contiguous, a length W divides, no causal) trace the forward and each backward
    program once, for any W; a second call with other values traces nothing; nor does a
    zigzag causal ring, after its first call, whose steps take at most three shapes."""
    rank, world = RANK, WORLD
    before = traces()
    q, k, v = (shard(x, "contiguous", rank, world).float().requires_grad_()
               for x in inputs(31, 2, 2, EVEN))
    o = ring_attention(q, k, v, score_mod=fresh_bias, mask_mod=fresh_window)
    o.sum().backward()
    first = [a - b for a, b in zip(traces(), before)]
    q2, k2, v2 = (shard(x, "contiguous", rank, world).float().requires_grad_()
                  for x in inputs(32, 2, 2, EVEN))
    mid = traces()
    ring_attention(q2, k2, v2, score_mod=fresh_bias, mask_mod=fresh_window).sum().backward()
    second = [a - b for a, b in zip(traces(), mid)]
    zq, zk, zv = (shard(x, "zigzag", rank, world).float() for x in inputs(33, 2, 2, UNEVEN))
    mid = traces()
    ring_attention(zq, zk, zv, causal=True, layout="zigzag", score_mod=fresh_bias,
                   mask_mod=fresh_window)
    zigzag_first = traces()[0] - mid[0]
    mid = traces()
    ring_attention(zv, zq, zk, causal=True, layout="zigzag", score_mod=fresh_bias,
                   mask_mod=fresh_window)
    zigzag_second = traces()[0] - mid[0]
    ok = first == [1, 1, 1] and second == [0, 0, 0] and zigzag_first <= 3 \
        and zigzag_second == 0
    return ok, (f"rank {rank}/{world}, {world} steps: new traces (forward, dK/dV, dQ) "
                f"{first}, then {second}; zigzag causal forward {zigzag_first}, then "
                f"{zigzag_second}")


def bad_float_mask(b, h, q_idx, kv_idx):
    return q_idx - kv_idx                              # an integer, not a boolean


def three_args(b, q_idx, kv_idx):
    return q_idx >= kv_idx


def bad_mod_case(score_mod=None, mask_mod=None):
    """A mod that does not compile: every rank raises tessel.attention's located error (same
    message, file, line and column), before any communication (the group stays usable)."""
    q, k, v = (shard(x, "zigzag", RANK, WORLD).float() for x in inputs(0, 2, 2, UNEVEN))
    try:
        tessel.attention(q.numpy(), k.numpy(), v.numpy(), causal=True, score_mod=score_mod,
                         mask_mod=mask_mod)
        return False, "tessel.attention raised nothing"
    except tessel.CompilationError as e:
        want = e
    try:
        ring_attention(q, k, v, causal=True, layout="zigzag", score_mod=score_mod,
                       mask_mod=mask_mod)
        return False, f"rank {RANK}: no error"
    except tessel.CompilationError as e:
        got = e
    same = (type(got), str(got), got.filename, got.lineno, got.col) == \
        (type(want), str(want), want.filename, want.lineno, want.col)
    dist.barrier()
    # ... and usable: a ring after the error
    o = ring_attention(q, k, v, causal=True, layout="zigzag", mask_mod=window)
    return same and not torch.isnan(o).any(), f"rank {RANK}: {got}"


def mod_mismatch_case():
    """Rank 0 passes a mask_mod, the others none: the same ValueError on every rank."""
    q, k, v = (shard(x, "contiguous", RANK, WORLD).float() for x in inputs(0, 1, 1, UNEVEN))
    try:
        ring_attention(q, k, v, mask_mod=window if RANK == 0 else None)
    except ValueError as e:
        dist.barrier()
        return "rank 0 passes a mask_mod and rank 1 does not" in str(e), f"rank {RANK}: {e}"
    return False, f"rank {RANK}: no error"


def window_skip_case(layout, causal):
    """FlashAttention's window_size through the ring: shard pairs the window hides whole run
    no kernel (tessel.attention and attention_backward are called once per pair it does not
    hide: counted here), and o, lse, dq, dk and dv are the whole sequence's (float64
    reference) — rows near a shard's start see the shard before it."""
    import importlib
    rank, world = RANK, WORLD
    N, H, left, right = UNEVEN, 2, 3, (0 if causal else 2)
    q, k, v = inputs(41, H, H, N)
    g = torch.randn(1, H, N, D, generator=torch.Generator().manual_seed(42), dtype=torch.float64)
    pos = [shard(np.arange(N)[None, None, :], layout, r, world)[0, 0] for r in range(world)]
    expected = sum(any(qi - left <= ki <= qi + right and (ki <= qi or not causal)
                       for qi in pos[rank] for ki in pos[s]) for s in range(world))

    def allowed(b, h, qi, ki):
        return (ki >= qi - left) & (ki <= qi + right)
    args = dict(causal=causal, allowed=allowed)
    ref_o, ref_lse = reference_attention(to_np(q), to_np(k), to_np(v), **args)
    ref = reference_attention_backward(to_np(q), to_np(k), to_np(v), g.numpy(), **args)
    local = [shard(x, layout, rank, world).float().requires_grad_() for x in (q, k, v)]
    calls = {"attention": 0, "attention_backward": 0}
    patched = []
    for module, name in (("tessel.attention", "attention"), ("tessel.backward",
                                                             "attention_backward")):
        m = importlib.import_module(module)
        original = getattr(m, name)

        def counting(*a, _original=original, _name=name, **kw):
            calls[_name] += 1
            return _original(*a, **kw)
        setattr(m, name, counting)
        patched.append((m, name, original))
    try:
        o, lse = ring_attention(*local, causal=causal, layout=layout,
                                window_size=(left, right), return_lse=True)
        (o * shard(g, layout, rank, world).float()).sum().backward()
    finally:
        for m, name, original in patched:
            setattr(m, name, original)
    errs = [err_np(to_np(o), shard(ref_o, layout, rank, world)),
            err_np(lse.detach().numpy(), shard(ref_lse, layout, rank, world))]
    errs += [err_np(to_np(x.grad), shard(r, layout, rank, world)) for x, r in zip(local, ref)]
    ok = (max(errs) < 2e-5 and calls["attention"] == expected
          and calls["attention_backward"] == expected)
    return ok, (f"rank {rank}/{world}: {calls} kernel calls, {expected} pairs the window shows "
                f"(of {world}); errors o, lse, dq, dk, dv {', '.join(f'{e:.1e}' for e in errs)}")


def mod_cases():
    return {
        "mod-alibi-causal-contiguous": lambda: mod_case(2, 2, UNEVEN, True, "contiguous",
                                                        score="alibi"),
        "mod-alibi-causal-zigzag-gqa": lambda: mod_case(2, 1, UNEVEN, True, "zigzag",
                                                        score="alibi"),
        "mod-softcap-zigzag": lambda: mod_case(2, 2, UNEVEN, False, "zigzag", score="softcap"),
        "mod-flash-arguments-zigzag": lambda: mod_case(
            2, 2, UNEVEN, True, "zigzag", flash={"window_size": (WINDOW, 0), "softcap": CAP}),
        "mod-flash-alibi-zigzag-gqa": lambda: mod_case(
            2, 1, UNEVEN, False, "zigzag",
            flash={"alibi_slopes": torch.tensor([0.3, 0.1]), "softcap": CAP}),
        "mod-window-contiguous": lambda: mod_case(2, 2, UNEVEN, False, "contiguous",
                                                  mask="window"),
        "mod-window-zigzag": lambda: mod_case(2, 2, UNEVEN, False, "zigzag", mask="window"),
        "mod-causal-window-contiguous": lambda: mod_case(2, 2, UNEVEN, True, "contiguous",
                                                         mask="window"),
        "mod-causal-window-zigzag": lambda: mod_case(2, 2, UNEVEN, True, "zigzag",
                                                     mask="window"),
        "mod-prefix-lm-contiguous": lambda: mod_case(2, 2, UNEVEN, False, "contiguous",
                                                     mask="prefix-lm"),
        "mod-prefix-lm-zigzag": lambda: mod_case(2, 2, UNEVEN, False, "zigzag",
                                                 mask="prefix-lm"),
        "mod-document-alibi-causal-zigzag": lambda: mod_case(2, 2, UNEVEN, True, "zigzag",
                                                             score="alibi", mask="document"),
        "mod-rows-without-keys": lambda: mod_case(2, 2, UNEVEN, False, "zigzag", mask="holes"),
        "mod-cross-zigzag": lambda: mod_case(2, 2, UNEVEN, False, "zigzag", score="alibi",
                                             mask="window", Nk=UNEVEN + 8),
        "mod-cross-contiguous": lambda: mod_case(2, 2, UNEVEN, False, "contiguous",
                                                 score="softcap", mask="document",
                                                 Nk=UNEVEN - 5),
        "mod-f16-causal-zigzag": lambda: mod_case(2, 2, UNEVEN, True, "zigzag", score="alibi",
                                                  mask="window", dtype=torch.float16,
                                                  tol=4e-3),
        "mod-backward-causal-zigzag": lambda: mod_backward_case(
            2, 1, UNEVEN, True, "zigzag", score="alibi", mask="window", use_lse=True),
        "mod-backward-causal-contiguous": lambda: mod_backward_case(
            2, 2, UNEVEN, True, "contiguous", score="softcap", mask="document"),
        "mod-backward-prefix-lm-zigzag": lambda: mod_backward_case(
            2, 2, UNEVEN, False, "zigzag", score="softcap", mask="prefix-lm", strided=True),
        "mod-backward-rows-without-keys": lambda: mod_backward_case(
            2, 2, UNEVEN, True, "contiguous", mask="holes", use_lse=True),
        "mod-window-skips-pairs-causal": lambda: window_skip_case("contiguous", True),
        "mod-window-skips-pairs-zigzag": lambda: window_skip_case("zigzag", False),
        "mod-window-skips-pairs-causal-zigzag": lambda: window_skip_case("zigzag", True),
        "mod-world-one": mod_world_one_case,
        "mod-no-recompile": no_recompile_case,
        "mod-bad-mask-mod": lambda: bad_mod_case(mask_mod=bad_float_mask),
        "mod-bad-arity": lambda: bad_mod_case(mask_mod=three_args),
        "mod-mismatch": mod_mismatch_case,
    }


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
    if world in (2, 3):
        table.update(mod_cases())
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
