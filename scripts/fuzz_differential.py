#!/usr/bin/env python3
"""Differential fuzzing of the attention entry points: random shapes and options (GQA, causal,
scale, block sizes, FlashAttention's window / softcap / ALiBi, fp16, ragged varlen batches,
paged caches, split-KV, block masks over a captured tensor, FP8, tessel.flex_attention with
FlexAttention's own block masks and mods), each result against
tessel.reference's float64 attention (and its hand-written backward). A mismatch or an
exception is printed with the case. By default on numpy arrays (the CPU interpreter).

    python3 scripts/fuzz_differential.py [--seconds 300] [--seed 0]
        [--kinds forward backward serving block_mask fp8 varlen_backward flex flash]
        [--device numpy|cpu|cuda]        (varlen_backward, flex: torch tensors only)
        [--compile]                      (the entry points through torch.compile)

--device cpu passes torch CPU tensors (the interpreter again, through tessel's torch entry);
--device cuda passes CUDA tensors, fp16 and bf16 (the shipped fast paths), at head dims 64, 128
and 256 and lengths up to 2k, with tolerances for the inputs' precision. Exit 1 if any case
failed. test/python/test_fuzz_differential.py runs a few fixed-seed cases of each kind in CI;
docs/dev/fuzzing.md has the campaigns.
"""
import argparse
import contextlib
import importlib
import math
import sys
import time

import numpy as np

import tessel
from tessel.reference import (position_mods, reference_attention,
                              reference_attention_backward, reference_kvcache, reference_rotary,
                              reference_varlen)


class Backend:
    """Where the cases run: numpy arrays (the interpreter), or torch tensors on a device. Inputs
    are drawn in float64 and rounded to the case's dtype; the reference sees the rounded values."""

    def __init__(self, device="numpy"):
        self.device = device
        self.torch = None
        if device != "numpy":
            import torch
            self.torch = torch
        gpu = device == "cuda"
        self.dtypes = ["f16", "bf16"] if gpu else ["f32", "f32", "f32", "f16"]
        # on the GPU also 96 (padded, or DB: forward_case) and 192 (native on sm_90a)
        self.head_dims = [64, 128, 256, 96, 192] if gpu else [16, 32, 64]
        # the KV cache's: on the GPU also head dims read in blocks of the next fast one (DB)
        self.serving_head_dims = [64, 128, 96, 80] if gpu else [16, 32, 64]
        # attention_varlen's too: on the GPU also head dims it runs padded to 64 / 128
        self.varlen_head_dims = [40, 64, 96, 128] if gpu else self.serving_head_dims
        self.block_sizes = [None, None, None, 64, 128] if gpu else [None, None, 16, 32, 64, 24]
        self.key_blocks = [None, None, None, 64, 128] if gpu else [None, None, 16, 32, 64, 80]
        self.lengths_q = [1, 17, 64, 127, 128, 700, 1024, 1500] if gpu else \
            [1, 2, 7, 16, 17, 33, 64, 65, 100]
        self.lengths_k = [1, 33, 128, 999, 1024, 2048] if gpu else \
            [1, 3, 16, 31, 64, 65, 99, 130]
        # Tolerances (relative to max(1, |reference|)): the inputs' precision on the GPU.
        self.tol = {"f32": 2e-4, "f16": 2e-2, "bf16": 6e-2}
        self.grad_tol = {"f32": 1e-3, "f16": 5e-2, "bf16": 1.5e-1}

    def tensor(self, x, dtype):
        """(the array or tensor tessel gets, its values as float64 numpy)."""
        if self.torch is None:
            a = x.astype(np.float32 if dtype == "f32" else np.float16)
            return a, a.astype(np.float64)
        t = {"f32": self.torch.float32, "f16": self.torch.float16,
             "bf16": self.torch.bfloat16}[dtype]
        a = self.torch.from_numpy(x.astype(np.float32)).to(device=self.device, dtype=t)
        return a, a.double().cpu().numpy()

    def index(self, x):
        x = np.ascontiguousarray(x, np.int32)
        return x if self.torch is None else self.torch.from_numpy(x).to(self.device)

    def alibi(self, x):
        return x if x is None or self.torch is None else self.torch.from_numpy(x).to(self.device)

    def numpy(self, x):
        return np.asarray(x, np.float64) if self.torch is None else \
            x.detach().double().cpu().numpy()


BACKEND = Backend()


def _flash_options(rng, H):
    window = None if rng.random() < 0.7 else (int(rng.choice([-1, 0, 3, 20])),
                                               int(rng.choice([-1, 0, 5])))
    softcap = None if rng.random() < 0.75 else float(rng.choice([5.0, 30.0]))
    alibi = None if rng.random() < 0.8 else rng.uniform(0.01, 0.5, size=(H,)).astype(np.float32)
    return window, softcap, alibi


def _rel(got, want):
    if want.size == 0:
        return 0.0
    return float(np.abs(BACKEND.numpy(got) - want).max() / max(1.0, np.abs(want).max()))


def _pick(rng, values):
    return values[int(rng.integers(0, len(values)))]


def _dense_case(rng, shorter=False):
    b = BACKEND
    Hkv, G = int(rng.integers(1, 3)), int(rng.choice([1, 2]))
    lq, lk = (ls[:len(ls) - 1] if shorter else ls for ls in (b.lengths_q, b.lengths_k))
    case = dict(B=int(rng.integers(1, 3)), H=Hkv * G, Hkv=Hkv, Nq=_pick(rng, lq),
                Nk=_pick(rng, lk), D=_pick(rng, b.head_dims), causal=bool(rng.integers(0, 2)),
                scale=None if rng.random() < 0.6 else float(rng.choice([0.05, 0.3, -0.2])),
                block_m=_pick(rng, b.block_sizes), block_n=_pick(rng, b.key_blocks),
                dtype=_pick(rng, b.dtypes))
    if b.device == "cuda" and case["D"] in (256, 96, 192):   # the defaults' blocks fit
        case.update(block_m=None, block_n=None)
    case["window_size"], case["softcap"], case["alibi_slopes"] = _flash_options(rng, case["H"])
    return case


def _inputs(rng, c):
    """(q, k, v as tessel gets them, their float64 values)."""
    shapes = ((c["B"], c["H"], c["Nq"], c["D"]), (c["B"], c["Hkv"], c["Nk"], c["D"]),
              (c["B"], c["Hkv"], c["Nk"], c.get("Dv", c["D"])))
    pairs = [BACKEND.tensor(rng.standard_normal(s), c["dtype"]) for s in shapes]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _call_options(c):
    return dict(causal=c["causal"], scale=c["scale"], enable_gqa=c["H"] != c["Hkv"],
                block_m=c["block_m"], block_n=c["block_n"], window_size=c["window_size"],
                softcap=c["softcap"], alibi_slopes=BACKEND.alibi(c["alibi_slopes"]))


# The user mods forward_case draws: a relative bias read from a captured tensor (index
# q - kv + _REL_MID, so one kernel serves every length) and a prefix-LM mask whose prefix
# length is a captured one-element tensor.
_REL_MID = 4096


def _user_mods(rng, H):
    """(score_mod, mask_mod) for tessel (None or functions over captured tensors) and their
    float64 numpy forms for tessel.reference (applied after FlashAttention's three), and a
    description."""
    score_mod = mask_mod = ref_score = ref_mask = None
    what = []
    if rng.random() < 0.2:
        rel64 = BACKEND.tensor(rng.standard_normal((H, 2 * _REL_MID)), "f32")[1]
        rel = BACKEND.tensor(rel64, "f32")[0]

        def relative_bias(score, b, h, q_idx, kv_idx):
            return score + rel[h, q_idx - kv_idx + _REL_MID]
        score_mod = relative_bias
        ref_score = lambda s, b, h, i, j: s + rel64[h, i - j + _REL_MID]   # noqa: E731
        what.append("relative bias")
    if rng.random() < 0.15:
        n = int(rng.integers(0, 40))
        prefix = BACKEND.index(np.array([n]))

        def prefix_lm(b, h, q_idx, kv_idx):
            return (kv_idx < prefix[0]) | (q_idx >= kv_idx)
        mask_mod = prefix_lm
        ref_mask = lambda b, h, i, j: (j < n) | (i >= j)   # noqa: E731
        what.append(f"prefix-LM {n}")
    return score_mod, mask_mod, ref_score, ref_mask, what


def _with_user_mods(c, ref_score, ref_mask):
    """tessel.reference's (score, score_grad, allowed) for the case's FlashAttention arguments
    top-left aligned, as tessel.attention's are (causal is reference_attention's own), then the
    user's score_mod and mask_mod (score_grad is the cap's alone: the user mods add a bias,
    whose derivative is 1)."""
    score, score_grad, allowed = position_mods(0, False, c["window_size"], c["softcap"],
                                               c["alibi_slopes"])
    if ref_score is not None:
        score = (lambda inner: lambda s, *ix: ref_score(inner(s, *ix), *ix))(score)
    if ref_mask is not None:
        allowed = (lambda inner: lambda *ix: inner(*ix) & ref_mask(*ix))(allowed)
    return score, score_grad, allowed


def _value_head_dim(rng, c, dims=None):
    """At times v gets a head dim of its own (SDPA's Ev: tessel.attention pads the smaller
    side), another of the backend's head dims (`dims`: of the entry point); half of those
    forward cases run the kernels' DV instead (attention.VALUE_HEAD_DIM_KERNEL, the default
    since its GPU check), the others the padded route."""
    others = [d for d in (dims or BACKEND.head_dims) if d != c["D"]]
    if others and rng.random() < 0.15:
        c["Dv"] = _pick(rng, others)
        c["dv_kernel"] = bool(rng.integers(0, 2))


@contextlib.contextmanager
def _block_dim_forced(c):
    """On the interpreter, where the serving kernels' DB (blocks wider than the head dim,
    columns past it read as 0: what CUDA calls at 96, 80 or 40 get) is never chosen, the case's
    c["DB"] forced for attention_with_kvcache and attention_varlen, with the fast paths' rule
    answering (16, 16) blocks; nothing without it."""
    if not c.get("DB"):
        yield
        return
    from tessel import serving, serving_checks
    patches = [(serving_checks, "kvcache_block_head_dim", lambda *a: c["DB"]),
               (serving, "_fast_blocks", lambda *a: (16, 16)),
               (serving, "_varlen_padded_dim", lambda *a: c["DB"]),
               (serving, "_varlen_block_dim", lambda *a: True)]
    saved = [(m, n, getattr(m, n)) for m, n, _ in patches]
    for m, n, f in patches:
        setattr(m, n, f)
    try:
        yield
    finally:
        for m, n, f in saved:
            setattr(m, n, f)


def _draw_block_dim(rng, c):
    """On the interpreter, at times a head dim that is a multiple of 8 but not 16 (24, 40) read
    in blocks 8 wider (c["DB"], _block_dim_forced)."""
    if BACKEND.device != "cuda" and rng.random() < 0.15:
        c["D"] = int(rng.choice([24, 40]))
        c["DB"] = c["D"] + 8


@contextlib.contextmanager
def _switched(c, module="tessel.attention", name="VALUE_HEAD_DIM_KERNEL", key="dv_kernel"):
    """A module's switch as the case's `key` says, for the call: by default the DV switch
    (attention.VALUE_HEAD_DIM_KERNEL, or serving_checks' VARLEN_VALUE_HEAD_DIM_KERNEL for
    varlen)."""
    mod = importlib.import_module(module)
    saved = getattr(mod, name)
    setattr(mod, name, c.get(key, () if name.endswith("_CHIPS") else False))
    try:
        yield
    finally:
        setattr(mod, name, saved)


@contextlib.contextmanager
def _dense_block_dim(c):
    """On CUDA, at a head dim tessel pads (96): the kernels' DB (attention's and backward's
    BLOCK_HEAD_DIM_CHIPS listing the device's chip) where c["db"], padded copies (both empty)
    where not, for the call."""
    if c.get("db") is None:
        yield
        return
    from tessel import backward
    modules = (importlib.import_module("tessel.attention"), backward)
    saved = [m.BLOCK_HEAD_DIM_CHIPS for m in modules]
    for m in modules:
        m.BLOCK_HEAD_DIM_CHIPS = (tessel.gpu.chip_of(0),) if c["db"] else ()
    try:
        yield
    finally:
        for m, chips in zip(modules, saved):
            m.BLOCK_HEAD_DIM_CHIPS = chips


def _draw_dense_block_dim(rng, c):
    """c["db"] for _dense_block_dim: on CUDA at head dim 96, True or False at even odds (the
    dense kernels' DB, or with a block mask the block-sparse kernels')."""
    c["db"] = bool(rng.integers(0, 2)) if BACKEND.device == "cuda" and c["D"] == 96 else None


def forward_case(rng):
    """tessel.attention's o and lse, at times with a score_mod / mask_mod over captured
    tensors; None, or what went wrong."""
    c = _dense_case(rng)
    _value_head_dim(rng, c)
    _draw_dense_block_dim(rng, c)
    (q, k, v), ref = _inputs(rng, c)
    score_mod, mask_mod, ref_score, ref_mask, c["mods"] = _user_mods(rng, c["H"])
    with _switched(c), _dense_block_dim(c):
        o, lse = tessel.attention(q, k, v, return_lse=True, score_mod=score_mod,
                                  mask_mod=mask_mod, **_call_options(c))
    score, _, allowed = _with_user_mods(c, ref_score, ref_mask)
    scale = 1 / math.sqrt(c["D"]) if c["scale"] is None else c["scale"]
    ro, rl = reference_attention(*ref, scale=scale, causal=c["causal"], score=score,
                                 allowed=allowed, enable_gqa=c["H"] != c["Hkv"])
    lse = BACKEND.numpy(lse)
    seen = np.isfinite(rl)
    err = _rel(o, ro)
    lse_err = float(np.abs(lse[seen] - rl[seen]).max()) if seen.any() else 0.0
    if err > BACKEND.tol[c["dtype"]] or lse_err > 1e-2 or \
            not np.array_equal(np.isneginf(lse), np.isneginf(rl)):
        return f"forward {c}: o {err:.2e}, lse {lse_err:.2e}"
    return None


def backward_case(rng):
    """dq, dk, dv (with a dlse term at times): tessel.attention_backward, or on torch tensors
    at times tessel.attention's autograd (loss.backward())."""
    c = _dense_case(rng, shorter=True)
    autograd = BACKEND.torch is not None and rng.random() < 0.5
    c["autograd"] = autograd
    if autograd:
        _value_head_dim(rng, c)
        # A v narrower than q through the DV forward with gradients, and the backward's own
        # programs at v's width (CUDA; both drawn, whatever their defaults).
        c["dv_grad"] = bool(rng.integers(0, 2))
        c["dv_programs"] = ("sm_90a",) if rng.integers(0, 2) else ()
    else:                              # attention_backward takes a v narrower than q
        _value_head_dim(rng, c, [d for d in BACKEND.head_dims if d < c["D"]] or [c["D"]])
    _draw_dense_block_dim(rng, c)
    (q, k, v), ref = _inputs(rng, c)
    do, do64 = BACKEND.tensor(rng.standard_normal(ref[0].shape[:3] + ref[2].shape[3:]),
                              c["dtype"])
    dlse = dlse64 = None
    if rng.random() < 0.3:
        dlse, dlse64 = BACKEND.tensor(rng.standard_normal(ref[0].shape[:3]), "f32")
    score_mod, mask_mod, ref_score, ref_mask, c["mods"] = _user_mods(rng, c["H"])
    options = dict(_call_options(c), score_mod=score_mod, mask_mod=mask_mod)
    for x in (q, k, v) if autograd else ():
        x.requires_grad_()
    with _dense_block_dim(c), _switched(c, name="VALUE_HEAD_DIM_GRAD", key="dv_grad"), \
            _switched(c, "tessel.backward", "VALUE_HEAD_DIM_BACKWARD_CHIPS", key="dv_programs"):
        o, lse = tessel.attention(q, k, v, return_lse=True, **options)
        if autograd:
            loss = (o.float() * do.float()).sum()
            if dlse is not None:
                loss = loss + (lse * dlse).sum()
            loss.backward()
            grads = (q.grad, k.grad, v.grad)
        else:
            grads = tessel.attention_backward(q, k, v, o, lse, do, dlse=dlse, **options)
    score, score_grad, allowed = _with_user_mods(c, ref_score, ref_mask)
    scale = 1 / math.sqrt(c["D"]) if c["scale"] is None else c["scale"]
    want = reference_attention_backward(*ref, do64, scale=scale, causal=c["causal"],
                                        score=score, score_grad=score_grad, allowed=allowed,
                                        enable_gqa=c["H"] != c["Hkv"], dlse=dlse64)
    errs = [_rel(g, w) for g, w in zip(grads, want)]
    if max(errs) > BACKEND.grad_tol[c["dtype"]]:
        return f"backward {c} dlse={dlse is not None}: dq, dk, dv {errs}"
    return None


def _varlen_batch(rng, B, H, Hkv, D, dtype, Dv=None):
    """B packed sequences (empty ones too) with rows past the last: (query lengths, key
    lengths, cu_seqlens_q, cu_seqlens_k, (q, k, v) as tessel gets them, their float64 values);
    `Dv`: v's head dim where it is its own."""
    lq = [int(x) for x in rng.choice([0, 1, 5, 17, 64, 70], size=B)]
    lk = [int(x) for x in rng.choice([0, 1, 9, 33, 64, 100], size=B)]
    cq, ck = (np.concatenate([[0], np.cumsum(x)]).astype(np.int32) for x in (lq, lk))
    pairs = [BACKEND.tensor(rng.standard_normal(shape), dtype)
             for shape in ((int(cq[-1]) + 2, H, D), (int(ck[-1]) + 1, Hkv, D),
                           (int(ck[-1]) + 1, Hkv, Dv or D))]
    return lq, lk, cq, ck, [p[0] for p in pairs], [p[1] for p in pairs]


def _paged_keys(rng, lk, ck, k64, v64, dtype):
    """The packed keys and values of sequences of lk keys (rows ck[b] on of k64, v64) in paged
    caches of shuffled pages: (k_cache, v_cache, {"block_table": ..., and "seqused_k" at
    times})."""
    page = int(rng.choice([1, 7, 16, 64]))
    per = max(1, -(-max(lk + [1]) // page))
    n_pages = len(lk) * per + 2
    table = rng.permutation(n_pages)[:len(lk) * per].reshape(len(lk), per).astype(np.int32)
    caches = []
    for x64 in (k64, v64):
        cache = rng.standard_normal((n_pages, page) + x64.shape[1:])
        for b, n in enumerate(lk):
            r = np.arange(n)
            cache[table[b, r // page], r % page] = x64[ck[b] + r]
        caches.append(BACKEND.tensor(cache, dtype)[0])
    given = {"block_table": table}
    if rng.random() < 0.5:
        given["seqused_k"] = np.array(lk, np.int32)
    return caches[0], caches[1], given


def _seqused(rng, lk):
    """At times FlashAttention-3's seqused_k over packed keys (each sequence's first n of its
    span; serving_checks.PACKED_SEQUSED_CUDA on CUDA): the counts, or None."""
    from tessel import serving_checks
    if rng.random() >= 0.3 or (BACKEND.device == "cuda" and
                               not serving_checks.PACKED_SEQUSED_CUDA):
        return None
    return np.array([int(rng.integers(0, n + 1)) for n in lk], np.int32)


def serving_case(rng):
    """tessel.attention_varlen or attention_with_kvcache (contiguous or paged, split-KV, new
    keys and values appended at times)."""
    Hkv, G = int(rng.integers(1, 3)), int(rng.choice([1, 2, 4]))
    H, D, dtype = Hkv * G, _pick(rng, BACKEND.serving_head_dims), _pick(rng, BACKEND.dtypes)
    causal = bool(rng.integers(0, 2))
    window, softcap, alibi = _flash_options(rng, H)
    scale = None if rng.random() < 0.7 else 0.2
    flash = dict(causal=causal, scale=scale, window_size=window, softcap=softcap,
                 alibi_slopes=BACKEND.alibi(alibi))
    refs = dict(scale=scale, causal=causal, window=window, softcap=softcap, alibi=alibi)
    B = int(rng.integers(1, 4))
    c = {"D": D}
    if rng.random() < 0.5:
        c["D"] = _pick(rng, BACKEND.varlen_head_dims)
        # v of its own head dim at times, padded or through the varlen kernel's DV
        # (serving_checks.VARLEN_VALUE_HEAD_DIM_KERNEL) as _value_head_dim draws it; or blocks
        # wider than D (DB)
        _value_head_dim(rng, c, BACKEND.varlen_head_dims)
        if "Dv" not in c:
            _draw_block_dim(rng, c)
        D = c["D"]
        lq, lk, cq, ck, (q, k, v), (q64, k64, v64) = _varlen_batch(rng, B, H, Hkv, D, dtype,
                                                                   c.get("Dv"))
        from tessel import varlen_cache
        paged = {}
        if "Dv" not in c and "DB" not in c and rng.random() < 0.3 and \
                (BACKEND.device != "cuda" or varlen_cache.CUDA_CHECKED):
            # The keys in a paged cache (block_table), counted by seqused_k or cu_seqlens_k.
            k, v, paged = _paged_keys(rng, lk, ck, k64, v64, dtype)
            c["page"] = int(k.shape[1])
            # A mixed batch's decode steps by the split-KV program, or not (PACK_DECODE_ROWS);
            # a few queries a sequence gathered for attention_with_kvcache, or not.
            c["pack"], c["few"] = (bool(x) for x in rng.random(2) < 0.5)
        used = None if paged else _seqused(rng, lk)
        if used is not None:
            paged = {"seqused_k": used}
            c["used"] = used.tolist()
        cuda = "_CUDA" if BACKEND.device == "cuda" else ""
        with _switched(c, "tessel.serving_checks", "VARLEN_VALUE_HEAD_DIM_KERNEL"), \
                _switched(c, "tessel.varlen_cache", "PACK_DECODE_ROWS" + cuda, key="pack"), \
                _switched(c, "tessel.varlen_cache", "FEW_QUERIES_PACKED" + cuda, key="few"), \
                _block_dim_forced(c):
            o = tessel.attention_varlen(
                q, k, v, BACKEND.index(cq),
                None if "block_table" in paged and "seqused_k" in paged else BACKEND.index(ck),
                max(lq + [1]), max(lk + [1]), **flash,
                **{n: BACKEND.index(x) for n, x in paged.items()})
        ro, _ = reference_varlen(q64, k64, v64, cq, ck, seqused_k=used, **refs)
        err = _rel(o[:int(cq[-1])], ro[:cq[-1]])
        return f"varlen {dtype} {refs} {lq} {lk} used={c.get('used')} H={H} Hkv={Hkv} D={D} " \
            f"Dv={c.get('Dv')} " \
            f"page={c.get('page')} pack={c.get('pack')} few={c.get('few')} " \
            f"dv_kernel={c.get('dv_kernel')} DB={c.get('DB')}: {err:.2e}" \
            if err > BACKEND.tol[dtype] else None
    _draw_block_dim(rng, c)
    D = c["D"]
    Sq, page = int(rng.choice([1, 2, 5])), rng.choice([None, 1, 7, 16, 64])
    lens = rng.integers(0, 120, size=B).astype(np.int32)
    from tessel import kvcache_append
    Sk = 0 if rng.random() < 0.7 else int(rng.choice([1, Sq, 3]))     # k=, v= appended
    if BACKEND.device == "cuda" and not kvcache_append.CUDA_CHECKED:
        Sk = 0
    cap = int(lens.max()) + Sk
    q, q64 = BACKEND.tensor(rng.standard_normal((B, Sq, H, D)), dtype)
    # FlashAttention's cache_batch_idx (a contiguous cache of more sequences, distinct ones
    # picked) and cache_leftpad, at times.
    idx = None if page is not None or rng.random() < 0.7 else \
        rng.permutation(B + 2)[:B].astype(np.int32)
    from tessel import serving_checks
    leftpad = None if rng.random() < 0.7 or (BACKEND.device == "cuda" and
                                             not serving_checks.LEFTPAD_CHECKED) else \
        np.array([rng.integers(0, n + 1) for n in lens], np.int32)
    if page is None:
        shape, table = (B if idx is None else B + 2, cap + 3, Hkv, D), None
    else:
        pages = max(1, -(-cap // page)) + 1
        shape = (B * pages + 2, int(page), Hkv, D)
        table = rng.permutation(shape[0])[:B * pages].reshape(B, pages).astype(np.int32)
    (kc, kc64), (vc, vc64) = (BACKEND.tensor(rng.standard_normal(shape), dtype)
                              for _ in range(2))
    new, R = {}, 0
    if Sk:
        (kn, kn64), (vn, vn64) = (BACKEND.tensor(rng.standard_normal((B, Sk, Hkv, D)), dtype)
                                  for _ in range(2))
        new = dict(k=kn, v=vn)
        if D % 16 == 0 and rng.random() < 0.5:  # FlashAttention's rotary embeddings too
            R = int(rng.choice([r for r in (16, 32, 64, D) if r <= D]))
            inter = bool(rng.integers(0, 2))
            angle = np.arange(cap + Sq)[:, None] * rng.uniform(0.01, 1.0, (1, R // 2))
            cos, sin = np.cos(angle), np.sin(angle)
            new.update(rotary_cos=BACKEND.tensor(cos, "f32")[0],
                       rotary_sin=BACKEND.tensor(sin, "f32")[0], rotary_interleaved=inter)
            local = window is not None and tuple(window) != (-1, -1)
            for b in range(B):
                at = int(lens[b]) + np.arange(Sk)
                kn64[b] = reference_rotary(kn64[b], cos, sin, at, inter)
                q_at = int(lens[b]) + np.arange(Sq) if causal or local else \
                    np.full(Sq, int(lens[b]))
                q64[b] = reference_rotary(q64[b], cos, sin, q_at, inter)
        for b in range(B):                      # where the new rows go (the reference's cache)
            for i in range(Sk):
                pos = int(lens[b]) + i
                at = (b if idx is None else idx[b], pos) if table is None else \
                    (table[b, pos // page], pos % page)
                kc64[at], vc64[at] = kn64[b, i], vn64[b, i]
    splits = None if rng.random() < 0.5 else int(rng.choice([1, 2, 3, 7]))
    with _block_dim_forced(c):
        o = tessel.attention_with_kvcache(
            q, kc, vc, BACKEND.index(lens), block_table=None if table is None else
            BACKEND.index(table), num_splits=splits, **flash, **new,
            cache_batch_idx=None if idx is None else BACKEND.index(idx),
            cache_leftpad=None if leftpad is None else BACKEND.index(leftpad))
    ro, _ = reference_kvcache(q64, kc64, vc64, lens + Sk, table, **refs, batch_idx=idx,
                              leftpad=leftpad)
    err = _rel(o, ro)
    # The cache as appended: exactly, or within the dtype's rounding of rotated keys.
    written = not Sk or (_rel(kc, kc64) <= (BACKEND.tol[dtype] if R else 0) and
                         np.array_equal(BACKEND.numpy(vc), vc64))
    if err > BACKEND.tol[dtype] or not np.isfinite(BACKEND.numpy(o)).all() or not written:
        return f"kvcache {dtype} {refs} lens={list(lens)} page={page} splits={splits} " \
               f"batch_idx={idx} leftpad={leftpad} " \
               f"Sq={Sq} Sk={Sk} rotary={R} H={H} Hkv={Hkv} D={D} DB={c.get('DB')}: " \
               f"{err:.2e}{'' if written else ' (the cache not as appended)'}"
    return None


def varlen_backward_case(rng):
    """attention_varlen's gradients through torch's autograd (torch tensors only), against
    tessel.reference's float64 backward one sequence at a time with the varlen conventions
    (causal, window and ALiBi bottom-right aligned)."""
    torch = BACKEND.torch
    Hkv, G = int(rng.integers(1, 3)), int(rng.choice([1, 2]))
    H, D, dtype = Hkv * G, _pick(rng, BACKEND.varlen_head_dims), _pick(rng, BACKEND.dtypes)
    causal = bool(rng.integers(0, 2))
    window, softcap, alibi = _flash_options(rng, H)
    B = int(rng.integers(1, 4))
    lq, lk, cq, ck, (q, k, v), (q64, k64, v64) = _varlen_batch(rng, B, H, Hkv, D, dtype)
    for x in (q, k, v):
        x.requires_grad_()
    used = _seqused(rng, lk)
    o = tessel.attention_varlen(q, k, v, BACKEND.index(cq), BACKEND.index(ck),
                                max(lq + [1]), max(lk + [1]), causal=causal,
                                window_size=window, softcap=softcap,
                                alibi_slopes=BACKEND.alibi(alibi),
                                seqused_k=None if used is None else BACKEND.index(used))
    g = rng.standard_normal(tuple(o.shape))
    g[int(cq[-1]):] = 0
    (o.float() * torch.from_numpy(g).float().to(o.device)).sum().backward()
    want = [np.zeros(x.shape) for x in (q64, k64, v64)]
    t = lambda x: np.ascontiguousarray(x.transpose(1, 0, 2))[None]   # noqa: E731
    for b in range(B):
        nq, nk = lq[b], lk[b] if used is None else int(used[b])
        if nq == 0 or nk == 0:
            continue
        rows, keys = slice(int(cq[b]), int(cq[b + 1])), slice(int(ck[b]), int(ck[b]) + nk)
        score, score_grad, allowed = position_mods(nk - nq, causal, window, softcap, alibi)
        grads = reference_attention_backward(
            t(q64[rows]), t(k64[keys]), t(v64[keys]), t(g[rows]), scale=1 / math.sqrt(D),
            score=score, score_grad=score_grad, allowed=allowed, enable_gqa=G > 1)
        for w, part, where in zip(want, grads, (rows, keys, keys)):
            w[where] = part[0].transpose(1, 0, 2)
    errs = [_rel(x.grad, w) for x, w in zip((q, k, v), want)]
    if max(errs) > BACKEND.grad_tol[dtype]:
        return f"varlen backward {dtype} causal={causal} window={window} softcap={softcap} " \
               f"alibi={alibi is not None} {lq} {lk} used={used} H={H} Hkv={Hkv} D={D}: {errs}"
    return None


def block_mask_case(rng):
    """A document mask read from a captured id tensor, through tessel.block_mask (the
    block-sparse kernels), causal or not, with GQA; o against float64, and half the time dq,
    dk, dv by tessel.attention_backward over the block mask (blocksparse_backward)."""
    grad = rng.random() < 0.5
    c = _dense_case(rng, shorter=grad)
    c.update(Nk=c["Nq"], block_m=None, block_n=None, window_size=None, softcap=None,
             alibi_slopes=None, grad=grad)
    _draw_dense_block_dim(rng, c)
    (q, k, v), ref = _inputs(rng, c)
    docs = np.sort(rng.integers(0, int(rng.integers(1, 6)), size=c["Nq"])).astype(np.int32)
    ids = BACKEND.index(docs)

    def same_document(b, h, q_idx, kv_idx):
        return ids[q_idx] == ids[kv_idx]

    def causal_document(b, h, q_idx, kv_idx):     # a block mask takes causal in its mask_mod
        return (ids[q_idx] == ids[kv_idx]) & (q_idx >= kv_idx)
    mod = causal_document if c["causal"] else same_document
    mask = tessel.block_mask(mod, None, None, c["Nq"], c["Nq"], like=q)
    options = dict(scale=c["scale"], enable_gqa=c["H"] != c["Hkv"], mask_mod=mod,
                   block_mask=mask)
    with _dense_block_dim(c):
        o, lse = tessel.attention(q, k, v, return_lse=True, **options)
    scale = 1 / math.sqrt(c["D"]) if c["scale"] is None else c["scale"]
    same = (lambda b, h, i, j: docs[i] == docs[j])
    ro, _ = reference_attention(*ref, scale=scale, causal=c["causal"], allowed=same,
                                enable_gqa=c["H"] != c["Hkv"])
    err = _rel(o, ro)
    if err > BACKEND.tol[c["dtype"]]:
        return f"block mask {c} documents {np.bincount(docs).tolist()}: o {err:.2e}"
    if grad:
        do, do64 = BACKEND.tensor(rng.standard_normal(ref[0].shape), c["dtype"])
        with _dense_block_dim(c):
            grads = tessel.attention_backward(q, k, v, o, lse, do, **options)
        want = reference_attention_backward(*ref, do64, scale=scale, causal=c["causal"],
                                            allowed=same, enable_gqa=c["H"] != c["Hkv"])
        errs = [_rel(g, w) for g, w in zip(grads, want)]
        if max(errs) > BACKEND.grad_tol[c["dtype"]]:
            return f"block mask backward {c} documents {np.bincount(docs).tolist()}: " \
                f"dq, dk, dv {errs}"
    return None


_GLOBAL_IDS = None      # flex_case's document ids as a module global (set per case)


def _global_document(b, h, q_idx, kv_idx):
    return _GLOBAL_IDS[b, q_idx] == _GLOBAL_IDS[b, kv_idx]


def _flex_mods(rng, torch, fa, B, Nq, Nk):
    """(score_mod, its float64 score and score_grad, mask_mod, its allowed, per-batch) for
    flex_case, written as FlexAttention users write them (torch functions, and_masks /
    or_masks, nested; ids in a closure or a module global)."""
    cap = float(rng.choice([5.0, 20.0]))
    scores = [
        (None, None, None),
        (lambda s, b, h, i, j: cap * torch.tanh(s / cap),
         lambda s, b, h, i, j: cap * np.tanh(s / cap),
         lambda s, b, h, i, j: 1 - np.tanh(s / cap) ** 2),
        (lambda s, b, h, i, j: torch.where(i >= j, s, s - 1.0),
         lambda s, b, h, i, j: np.where(i >= j, s, s - 1.0),
         lambda s, b, h, i, j: np.ones_like(s)),
    ]
    score_mod, score, score_grad = scores[int(rng.integers(0, len(scores)))]
    W = int(rng.integers(1, 40))
    docs = np.sort(rng.integers(0, int(rng.integers(1, 5)), size=(B, max(Nq, Nk))), axis=1)
    ids = BACKEND.index(docs)

    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    def window(b, h, q_idx, kv_idx):
        return torch.abs(q_idx - kv_idx) < W

    def same(table):                    # one function, two closures (two id tables)
        def document(b, h, q_idx, kv_idx):
            return table[b, q_idx] == table[b, kv_idx]
        return document
    document = same(ids)
    global _GLOBAL_IDS
    _GLOBAL_IDS = ids
    halves = np.arange(max(Nq, Nk))[None, :] >= rng.integers(0, max(Nq, Nk) + 1, size=(B, 1))
    ids2 = BACKEND.index(halves.astype(np.int64))
    masks = [
        (causal, lambda b, h, i, j: i >= j, False),
        (window, lambda b, h, i, j: np.abs(i - j) < W, False),
        (document, lambda b, h, i, j: docs[b, i] == docs[b, j], True),
        (fa.and_masks(causal, document), lambda b, h, i, j: (i >= j) & (docs[b, i] ==
                                                                      docs[b, j]), True),
        (fa.or_masks(window, causal), lambda b, h, i, j: (np.abs(i - j) < W) | (i >= j),
         False),
        (fa.or_masks(fa.and_masks(causal, document), window),
         lambda b, h, i, j: ((i >= j) & (docs[b, i] == docs[b, j])) | (np.abs(i - j) < W), True),
        (fa.and_masks(document, same(ids2)),
         lambda b, h, i, j: (docs[b, i] == docs[b, j]) & (halves[b, i] == halves[b, j]), True),
        (fa.and_masks(causal, _global_document),
         lambda b, h, i, j: (i >= j) & (docs[b, i] == docs[b, j]), True),
    ]
    mask_mod, allowed, per_batch = masks[int(rng.integers(0, len(masks)))]
    return score_mod, score, score_grad, mask_mod, allowed, per_batch


def flex_case(rng):
    """tessel.flex_attention with FlexAttention's own create_block_mask (block sizes and
    lengths the blocks do not divide), its mask combinators and torch-function mods, GQA, a
    scale; o and the LSE against float64, half the time dq, dk, dv through autograd."""
    torch = BACKEND.torch
    fa = importlib.import_module("torch.nn.attention.flex_attention")
    c = _dense_case(rng, shorter=True)
    for name in ("causal", "block_m", "block_n", "window_size", "softcap", "alibi_slopes"):
        del c[name]                     # (flex_attention's call has none of them)
    grad = rng.random() < 0.5
    c.update(grad=grad, block=int(_pick(rng, [64, 128] if BACKEND.device == "cuda" else
                                        [16, 32, 64, 128])))
    (q, k, v), ref = _inputs(rng, c)
    score_mod, score, score_grad, mask_mod, allowed, per_batch = _flex_mods(
        rng, torch, fa, c["B"], c["Nq"], c["Nk"])
    c["mods"] = (getattr(score_mod, "__name__", None), getattr(mask_mod, "__name__", None))
    bm = fa.create_block_mask(mask_mod, c["B"] if per_batch else None, None, c["Nq"], c["Nk"],
                              device=BACKEND.device, BLOCK_SIZE=c["block"])
    for x in (q, k, v) if grad else ():
        x.requires_grad_()
    o, lse = tessel.flex_attention(q, k, v, score_mod=score_mod, block_mask=bm,
                                   scale=c["scale"], enable_gqa=c["H"] != c["Hkv"],
                                   return_lse=True)
    scale = 1 / math.sqrt(c["D"]) if c["scale"] is None else c["scale"]
    ro, rlse = reference_attention(*ref, scale=scale, score=score, allowed=allowed,
                                   enable_gqa=c["H"] != c["Hkv"])
    live = np.isfinite(rlse)             # rows that see no key: 0 and -inf in both
    got = BACKEND.numpy(lse)[live]
    errs = [_rel(o, ro), float(np.abs(got - rlse[live]).max(initial=0.0)
                               / max(1.0, np.abs(rlse[live]).max(initial=0.0)))]
    if max(errs) > BACKEND.tol[c["dtype"]]:
        return f"flex {c}: o, lse {errs}"
    if grad:
        do, do64 = BACKEND.tensor(rng.standard_normal(ref[0].shape), c["dtype"])
        grads = torch.autograd.grad(o, (q, k, v), do)
        want = reference_attention_backward(*ref, do64, scale=scale, score=score,
                                            score_grad=score_grad, allowed=allowed,
                                            enable_gqa=c["H"] != c["Hkv"])
        errs = [_rel(g, w) for g, w in zip(grads, want)]
        if max(errs) > BACKEND.grad_tol[c["dtype"]]:
            return f"flex backward {c}: dq, dk, dv {errs}"
    return None


def fp8_case(rng):
    """FP8 (e4m3) q, k, v at head dims 128 and 256 with per-tensor or per-(batch, kv head)
    descales, bf16 or fp16 out, causal or not, GQA; o against float64 attention of the
    dequantized inputs, to 0.1 of max(1, |reference|) (P is rounded to e4m3: about 2 % here;
    a wrong kernel is off by the reference's size)."""
    c = _dense_case(rng)
    B, H, Hkv, Nq, Nk = (c[n] for n in ("B", "H", "Hkv", "Nq", "Nk"))
    D = int(rng.choice([128, 256]))
    torch = BACKEND.torch
    eight, dequantized, descales = [], [], []
    for shape in ((B, H, Nq, D), (B, Hkv, Nk, D), (B, Hkv, Nk, D)):
        x = rng.standard_normal(shape) * float(rng.choice([0.5, 1.0, 4.0]))
        per_head = rng.random() < 0.3
        d = (np.abs(x).reshape(B, shape[1], -1).max(-1) / 448.0).reshape(B, shape[1])
        d = d.reshape(B, Hkv, -1).max(-1) if per_head else np.float64(np.abs(x).max() / 448.0)
        dd = np.repeat(d, shape[1] // Hkv, 1)[..., None, None] if per_head else d
        x8 = (x / dd).astype(np.float32)
        if torch is None:
            bits = tessel.to_fp8(x8)
            eight.append(bits)
            dequantized.append(tessel.from_fp8(bits).astype(np.float64) * dd)
        else:
            t = torch.from_numpy(x8).to(BACKEND.device).to(torch.float8_e4m3fn)
            eight.append(t)
            dequantized.append(t.double().cpu().numpy() * dd)
        d32 = np.asarray(d, np.float32)
        descales.append(float(d) if not per_head else
                        d32 if torch is None else torch.from_numpy(d32).to(BACKEND.device))
    out = "f16" if rng.random() < 0.3 else "bf16"
    out_dtype = (np.float16 if out == "f16" else None) if torch is None else \
        (torch.float16 if out == "f16" else torch.bfloat16)
    o = tessel.attention(*eight, causal=c["causal"], scale=c["scale"], enable_gqa=H != Hkv,
                         descale_q=descales[0], descale_k=descales[1], descale_v=descales[2],
                         **({"out_dtype": out_dtype} if out_dtype is not None else {}))
    if torch is None and o.dtype == np.uint16:
        o = tessel.from_bf16(o)
    scale = 1 / math.sqrt(D) if c["scale"] is None else c["scale"]
    ro, _ = reference_attention(*dequantized, scale=scale, causal=c["causal"],
                                enable_gqa=H != Hkv)
    err = _rel(o, ro)
    if err > 0.1:
        return f"fp8 {c} D={D} out={out} per-head descales " \
               f"{[not isinstance(d, float) for d in descales]}: o {err:.2e}"
    return None


def flash_case(rng):
    """tessel.flash.flash_attn_func (FlashAttention's API): [B, S, H, D] inputs, query and key
    lengths that differ (causal, the window and ALiBi then bottom-right aligned, the varlen
    route), GQA, softcap, a scale, FlashAttention-3's attention_chunk; o and the LSE against
    float64, on torch tensors half the time dq, dk, dv through autograd."""
    from tessel import flash
    c = _dense_case(rng)
    torch = BACKEND.torch
    grad = torch is not None and rng.random() < 0.5
    c.update(grad=grad)
    (q, k, v), ref = _inputs(rng, c)

    def bshd(x):                               # FlashAttention's layout, contiguous
        return x.transpose(1, 2).contiguous() if torch is not None else \
            np.ascontiguousarray(np.swapaxes(x, 1, 2))
    q, k, v = (bshd(x) for x in (q, k, v))
    for x in (q, k, v) if grad else ():
        x.requires_grad_()
    # FlashAttention-3's attention_chunk a quarter of the time (chunks of any size), by either
    # route: the mask_mod's (equal lengths, C a multiple of CHUNK_MASK_MULTIPLE, shrunk here
    # at times so that small cases take it) or packed sequences.
    chunk = int(rng.integers(1, max(1, c["Nk"]) + 1)) if rng.random() < 0.25 else 0
    flash.CHUNK_MASK_MULTIPLE = int(rng.choice([128, 1, 4]))
    c.update(attention_chunk=chunk, chunk_mask_multiple=flash.CHUNK_MASK_MULTIPLE)
    o, lse, _ = flash.flash_attn_func(
        q, k, v, softmax_scale=c["scale"], causal=c["causal"],
        window_size=c["window_size"] or (-1, -1), softcap=c["softcap"] or 0.0,
        alibi_slopes=BACKEND.alibi(c["alibi_slopes"]), return_attn_probs=True,
        attention_chunk=chunk)
    score, score_grad, allowed = position_mods(c["Nk"] - c["Nq"], c["causal"],
                                               c["window_size"], c["softcap"],
                                               c["alibi_slopes"])
    if chunk:
        positioned, off = allowed, c["Nk"] - c["Nq"]

        def allowed(b, h, qi, ki):             # the query's chunk of key positions only
            return positioned(b, h, qi, ki) & ((qi + off) // chunk == ki // chunk)
    scale = 1 / math.sqrt(c["D"]) if c["scale"] is None else c["scale"]
    gqa = c["H"] != c["Hkv"]
    ro, rlse = reference_attention(*ref, scale=scale, score=score, allowed=allowed,
                                   enable_gqa=gqa)
    live = np.isfinite(rlse)
    got = BACKEND.numpy(lse)[live]
    errs = [_rel(bshd(o), ro), float(np.abs(got - rlse[live]).max(initial=0.0)
                                     / max(1.0, np.abs(rlse[live]).max(initial=0.0)))]
    if max(errs) > BACKEND.tol[c["dtype"]]:
        return f"flash {c}: o, lse {errs}"
    if grad:
        do, do64 = BACKEND.tensor(rng.standard_normal(ref[0].shape), c["dtype"])
        grads = torch.autograd.grad(o, (q, k, v), bshd(do))
        want = reference_attention_backward(*ref, do64, scale=scale, score=score,
                                            score_grad=score_grad, allowed=allowed,
                                            enable_gqa=gqa)
        errs = [_rel(bshd(g), w) for g, w in zip(grads, want)]
        if max(errs) > BACKEND.grad_tol[c["dtype"]]:
            return f"flash backward {c}: dq, dk, dv {errs}"
    return None


def flash_varlen_case(rng):
    """tessel.flash.flash_attn_varlen_func with FlashAttention-3's seqused_q, seqused_k and
    attention_chunk drawn over packed sequences of any lengths (some empty), causal, the
    window, softcap, ALiBi and a scale: o and the LSE against float64 on each sequence's used
    rows (bottom-right placed against its used keys), 0 and -inf on the others."""
    from tessel import flash
    Hkv, G = int(rng.integers(1, 3)), int(rng.choice([1, 2]))
    H, D, dtype = Hkv * G, _pick(rng, BACKEND.varlen_head_dims), _pick(rng, BACKEND.dtypes)
    causal = bool(rng.integers(0, 2))
    window, softcap, alibi = _flash_options(rng, H)
    scale = None if rng.random() < 0.7 else 0.2
    B = int(rng.integers(1, 4))
    lq, lk, cq, ck, (q, k, v), (q64, k64, v64) = _varlen_batch(rng, B, H, Hkv, D, dtype, None)

    def counts(lengths, p):             # at times the first n rows of each span only
        return [int(rng.integers(0, n + 1)) for n in lengths] if rng.random() < p else None
    used_q, used_k = counts(lq, 0.5), counts(lk, 0.3)
    chunk = int(rng.integers(1, max(lk + [1]) + 1)) if rng.random() < 0.4 else 0
    o, lse, _ = flash.flash_attn_varlen_func(
        q, k, v, BACKEND.index(cq), BACKEND.index(ck), max(lq + [1]), max(lk + [1]),
        softmax_scale=scale, causal=causal, window_size=window or (-1, -1),
        softcap=softcap or 0.0, alibi_slopes=BACKEND.alibi(alibi), return_attn_probs=True,
        attention_chunk=chunk,
        seqused_q=None if used_q is None else BACKEND.index(np.array(used_q, np.int32)),
        seqused_k=None if used_k is None else BACKEND.index(np.array(used_k, np.int32)))
    total = int(cq[-1])
    ro, rlse = np.zeros((total, H, D)), np.full((H, total), -np.inf)
    for b in range(B):
        nq, nk = (lq[b] if used_q is None else used_q[b]), (lk[b] if used_k is None else
                                                              used_k[b])
        if nq == 0 or nk == 0:
            continue
        score, _, placed = position_mods(nk - nq, causal, window, softcap, alibi)

        def allowed(bb, h, qi, ki, placed=placed, off=nk - nq):
            ok = placed(bb, h, qi, ki)          # and the query's chunk of key positions
            return ok & (qi + off >= 0) & ((qi + off) // chunk == ki // chunk) if chunk else ok
        t = lambda x: np.ascontiguousarray(x.transpose(1, 0, 2))[None]  # noqa: E731
        qs, ks = slice(int(cq[b]), int(cq[b]) + nq), slice(int(ck[b]), int(ck[b]) + nk)
        ob, lb = reference_attention(t(q64[qs]), t(k64[ks]), t(v64[ks]), scale=scale,
                                     score=score, allowed=allowed, enable_gqa=True)
        ro[qs], rlse[:, qs] = ob[0].transpose(1, 0, 2), lb[0]
    got = BACKEND.numpy(lse)[:, :total]
    live = np.isfinite(rlse)
    errs = [_rel(o[:total], ro), float(np.abs(got[live] - rlse[live]).max(initial=0.0)
                                       / max(1.0, np.abs(rlse[live]).max(initial=0.0)))]
    dead = not np.isfinite(got[~live]).any()
    if max(errs) > BACKEND.tol[dtype] or not dead:
        return (f"flash_varlen {dtype} causal={causal} window={window} softcap={softcap} "
                f"alibi={alibi is not None} scale={scale} {lq} {lk} used_q={used_q} "
                f"used_k={used_k} chunk={chunk} H={H} Hkv={Hkv} D={D}: o, lse {errs}, "
                f"unused rows -inf {dead}")
    return None


KINDS = {"forward": forward_case, "backward": backward_case, "serving": serving_case,
         "block_mask": block_mask_case, "fp8": fp8_case, "varlen_backward": varlen_backward_case,
         "flex": flex_case, "flash": flash_case, "flash_varlen": flash_varlen_case}
# Kinds that need torch tensors (attention_varlen's gradients come through torch's autograd;
# FlexAttention's BlockMask): left out on numpy.
TORCH_ONLY = {"varlen_backward", "flex"}


ENTRY_POINTS = ("attention", "attention_backward", "attention_varlen", "attention_with_kvcache")


@contextlib.contextmanager
def compiled_entry_points(torch):
    """tessel's entry points called through torch.compile (aot_eager, a fresh compile a call:
    no cache limit to fall back to eager at), so every case also checks the ops' fake
    implementations, autograd and routing against float64 (docs/torch-compile.md)."""
    saved = {name: getattr(tessel, name) for name in ENTRY_POINTS}

    def compiled(eager):
        def call(*args, **kwargs):
            torch._dynamo.reset()
            return torch.compile(lambda *a, **k: eager(*a, **k), backend="aot_eager")(
                *args, **kwargs)
        return call
    try:
        for name, eager in saved.items():
            setattr(tessel, name, compiled(eager))
        yield
    finally:
        for name, eager in saved.items():
            setattr(tessel, name, eager)


def run(kinds, seed, seconds=None, cases=None, device="numpy", compiled=False):
    """Runs cases of `kinds` in turn on `device` until `seconds` pass or `cases` ran;
    (count, failures). compiled: each entry-point call through torch.compile (torch
    tensors)."""
    global BACKEND
    BACKEND = Backend(device)
    if compiled:
        if BACKEND.torch is None:
            raise ValueError("--compile needs torch tensors: --device cpu or cuda")
        with compiled_entry_points(BACKEND.torch):
            return _run(kinds, seed, seconds, cases, device)
    return _run(kinds, seed, seconds, cases, device)


def _run(kinds, seed, seconds, cases, device):
    kinds = [k for k in kinds if device != "numpy" or k not in TORCH_ONLY]
    if not kinds:
        raise ValueError(f"no kind left to run on {device}: {sorted(TORCH_ONLY)} need torch")
    rng = np.random.default_rng(seed)
    deadline = None if seconds is None else time.time() + seconds
    count, failures = 0, []
    while (cases is None or count < cases) and (deadline is None or time.time() < deadline):
        kind = kinds[count % len(kinds)]
        count += 1
        try:
            problem = KINDS[kind](rng)
        except Exception as e:        # noqa: BLE001 (every exception is a finding)
            problem = f"{kind}: {type(e).__name__}: {str(e)[:300]}"
        if problem:
            failures.append(problem)
            print(problem, flush=True)
    return count, failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kinds", nargs="+", choices=list(KINDS), default=list(KINDS))
    ap.add_argument("--device", choices=["numpy", "cpu", "cuda"], default="numpy")
    ap.add_argument("--compile", action="store_true",
                    help="the entry points through torch.compile (torch tensors)")
    args = ap.parse_args()
    count, failures = run(args.kinds, args.seed, seconds=args.seconds, device=args.device,
                          compiled=args.compile)
    print(f"{count} cases, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
