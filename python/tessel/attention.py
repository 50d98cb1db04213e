"""tessel.attention: scaled dot-product attention written in the DSL.

The kernel is written the naive way: for one block of queries, the scores against every key
block, a softmax streamed across the key loop (normalised over the whole row), then the dot with
V. `tile-optimize` turns it into the online-softmax form. score_mod and mask_mod are @tessel.jit
functions traced into the loop body (FlexAttention semantics, applied per block: every index
argument is a tile of the score block's shape).

Layout BHSD: q [B, H, Nq, D], k and v [B, Hkv, Nk, D]; grid (ceil(Nq / BLOCK_M), B·H).
"""
import math

import numpy as np

from . import language as tl
from .jit import JITFunction, jit
from .runtime import dtype_of_array


@jit
def attention_kernel(q, k, v, o, lse_out, nq, nk, H, HKV, scale,
                     D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     CAUSAL: tl.constexpr, SCORE_MOD: tl.constexpr, MASK_MOD: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    kv_h = h // (H // HKV)                      # grouped-query: heads share a key/value head
    q_rows = bh * nq
    kv_rows = (b * HKV + kv_h) * nk
    qd = tl.make_desc(q, shape=(nq, D), strides=(D, 1), offset=q_rows * D)
    kd = tl.make_desc(k, shape=(nk, D), strides=(D, 1), offset=kv_rows * D)
    vd = tl.make_desc(v, shape=(nk, D), strides=(D, 1), offset=kv_rows * D)
    od = tl.make_desc(o, shape=(nq, D), strides=(D, 1), offset=q_rows * D)
    ld = tl.make_desc(lse_out, shape=(nq,), strides=(1,), offset=q_rows)

    m0 = pid_m * BLOCK_M
    qt = tl.load(qd, (m0, 0), shape=(BLOCK_M, D))
    q_idx = tl.broadcast_to((m0 + tl.arange(0, BLOCK_M))[:, None], (BLOCK_M, BLOCK_N))
    acc = tl.zeros((BLOCK_M, D), tl.float32)
    lse = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    for j in tl.stream(0, nk, BLOCK_N):
        kt = tl.load(kd, (j, 0), shape=(BLOCK_N, D))
        s = tl.dot(qt, kt.T) * scale
        kv_idx = tl.broadcast_to((j + tl.arange(0, BLOCK_N))[None, :], (BLOCK_M, BLOCK_N))
        if SCORE_MOD is not None:
            s = SCORE_MOD(s, b, h, q_idx, kv_idx)
        mask = kv_idx < nk
        if CAUSAL:
            mask = mask & (q_idx >= kv_idx)
        if MASK_MOD is not None:
            mask = mask & MASK_MOD(b, h, q_idx, kv_idx)
        s = tl.where(mask, s, float("-inf"))
        p, lse = tl.softmax(s, axis=1, return_lse=True)   # streamed over j
        vt = tl.load(vd, (j, 0), shape=(BLOCK_N, D))
        acc += tl.dot(p.to(vt.dtype), vt)
    tl.store(od, (m0, 0), acc.to(qt.dtype))
    tl.store(ld, (m0,), lse)


def _block(n, cap=64, floor=16):
    return max(floor, min(cap, 1 << max(0, (n - 1).bit_length())))


def _block_m(nq, head_dim, dtype):
    """The query block when the caller names none.

    f16/bf16 at head dims 64 and 128 with at least 128 queries: 128 rows, which the mma.sync
    fast path runs as 4 warps of 32 rows (FA2's layout; two m16 tiles share every K/V
    ldmatrix). On the H200 it beat 64-row blocks at d128 by 19-24 % and at d64 by 7 %
    (docs/bench/2026-11-29-h200-mma-perf2.md). Otherwise the smallest power of two that holds
    the queries, 16 to 64 (the reference lowering and the interpreter).
    """
    if dtype in ("f16", "bf16") and head_dim in (64, 128) and nq >= 128:
        return 128
    return _block(nq)


def _as_jit(fn, what):
    if fn is None or isinstance(fn, JITFunction):
        return fn
    if callable(fn):
        return jit(fn)
    raise TypeError(f"{what} must be a function, got {type(fn).__name__}")


def _prepare(q, k, v, causal, scale, score_mod, mask_mod, enable_gqa, block_m, block_n):
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, np.ndarray):
            raise TypeError(f"{name} must be a numpy array (the GPU path comes later)")
        if x.ndim != 4:
            raise ValueError(f"{name} must have shape [B, H, N, D], got {x.shape}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v differ in dtype: {q.dtype}, {k.dtype}, {v.dtype}")
    B, H, Nq, D = q.shape
    Bk, Hkv, Nk, Dk = k.shape
    if v.shape != k.shape:
        raise ValueError(f"k and v differ in shape: {k.shape} and {v.shape}")
    if Bk != B or Dk != D:
        raise ValueError(f"q {q.shape} and k {k.shape} disagree on batch or head dimension")
    if H != Hkv:
        if not enable_gqa:
            raise ValueError(f"q has {H} heads and k/v {Hkv}: pass enable_gqa=True for "
                             "grouped-query attention")
        if H % Hkv:
            raise ValueError(f"the number of query heads ({H}) must be a multiple of the "
                             f"number of key/value heads ({Hkv})")
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    BM = block_m or _block_m(Nq, D, dtype_of_array(q))
    BN = block_n or _block(Nk)
    q, k, v = (np.ascontiguousarray(x) for x in (q, k, v))
    o = np.zeros_like(q)
    lse = np.zeros((B, H, Nq), dtype=np.float32)
    args = (q, k, v, o, lse, Nq, Nk, H, Hkv, scale)
    constexprs = dict(D=D, BLOCK_M=BM, BLOCK_N=BN, CAUSAL=bool(causal),
                      SCORE_MOD=_as_jit(score_mod, "score_mod"),
                      MASK_MOD=_as_jit(mask_mod, "mask_mod"))
    grid = (-(-Nq // BM), B * H)
    return args, constexprs, grid, o, lse


def compile_attention(q, k, v, causal=False, scale=None, score_mod=None, mask_mod=None,
                      enable_gqa=False, block_m=None, block_n=None):
    """The CompiledKernel tessel.attention would run for these inputs (for IR inspection)."""
    args, constexprs, _, _, _ = _prepare(q, k, v, causal, scale, score_mod, mask_mod,
                                         enable_gqa, block_m, block_n)
    return attention_kernel.warmup(*args, **constexprs)


def attention(q, k, v, causal=False, scale=None, score_mod=None, mask_mod=None,
              enable_gqa=False, return_lse=False, block_m=None, block_n=None):
    """Scaled dot-product attention with PyTorch SDPA semantics, on numpy arrays.

    q [B, H, Nq, D]; k, v [B, Hkv, Nk, D] (Hkv = H unless enable_gqa). scale defaults to
    1/sqrt(D); causal is top-left aligned (q_idx >= kv_idx). score_mod(score, b, h, q_idx, kv_idx)
    returns new scores; mask_mod(b, h, q_idx, kv_idx) returns True where attention is allowed.
    Rows with every key masked give 0 (and lse -inf). Returns o, or (o, lse) with return_lse.
    """
    args, constexprs, grid, o, lse = _prepare(q, k, v, causal, scale, score_mod, mask_mod,
                                              enable_gqa, block_m, block_n)
    attention_kernel[grid](*args, **constexprs)
    return (o, lse) if return_lse else o
