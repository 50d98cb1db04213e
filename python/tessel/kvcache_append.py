"""attention_with_kvcache's `k=`, `v=`: new keys and values written into the cache in place
before the attention, as FlashAttention's flash_attn_with_kvcache does.

Sequence b's Sk new rows go to cache positions [cache_seqlens[b], cache_seqlens[b] + Sk): rows
of batch b of a contiguous cache, or — paged — row `pos % page_size` of page
`block_table[b, pos // page_size]`. The attention then sees cache_seqlens + Sk keys (causal and
the window bottom-right aligned to them); cache_seqlens itself is not changed (the caller's, as
in FlashAttention). One DSL program per (block of new rows, batch, KV head) copies the rows
through descriptors whose bounds drop what must not be written: rows past the new ones, past
the cache's capacity, or on a page number outside the cache — so bad lengths or tables never
write outside the tensors (numpy calls are checked and refused first).

FlashAttention's rotary embeddings (rotary_cos, rotary_sin, rotary_interleaved) rotate copies
of q and the new k first (rotary_kernel), in float32.
"""
import math

import numpy as np

from . import language as tl
from .grid import block_and_row, fold_grid
from .jit import jit
from .serving_checks import _check_same_dtype, _kind, _launch, _strided


# Whether CUDA calls take k=, v= and the rotary tables: on since test_serving_gpu.py's
# `test_kvcache_append` (8/8) and `test_kvcache_rotary` (4/4) passed on an H100 and the CUDA
# fuzzer's serving cases with them (forty-seventh session: bench/results/2026-12-07-s47/out).
CUDA_CHECKED = True


def _gate(fn, kind, what):
    if kind == "cuda" and not CUDA_CHECKED:
        raise NotImplementedError(
            f"tessel.{fn}: {what} on CUDA tensors waits for its GPU check "
            "(kvcache_append.CUDA_CHECKED); write the new rows into the cache yourself and "
            "pass cache_seqlens + Sk, or run on CPU tensors")


@jit
def kvcache_append_kernel(k_new, v_new, k_cache, v_cache, seqlens, table, B, SK, HKV, S,
                          limit, num_pages, max_pages, n_rs: tl.constexpr,
                          n_hs: tl.constexpr, nv_rs: tl.constexpr, nv_hs: tl.constexpr,
                          k_rs: tl.constexpr, k_hs: tl.constexpr, v_rs: tl.constexpr,
                          v_hs: tl.constexpr, D: tl.constexpr, BLOCK: tl.constexpr,
                          PAGE: tl.constexpr):
    # Grid (⌈SK/BLOCK⌉, B·HKV). PAGE 0: a contiguous cache [B, S, HKV, D]; else pages of PAGE
    # rows, `limit` = max_pages·PAGE rows a sequence. Batch b is rows b·S (b·SK) on of one
    # descriptor a head, not an element offset: i32 row indices, 64-bit addresses.
    pid, bh = block_and_row(tl.cdiv(SK, BLOCK))
    b = bh // HKV
    h = bh % HKV
    sd = tl.make_desc(seqlens, shape=(B,), strides=(1,))
    start = tl.minimum(tl.maximum(tl.load_scalar(sd, (b,)), 0), limit)
    end = tl.minimum(start + SK, limit)          # the rows this call writes: no others
    kn = tl.make_desc(k_new, shape=((b + 1) * SK, D), strides=(n_rs, 1), offset=h * n_hs)
    vn = tl.make_desc(v_new, shape=((b + 1) * SK, D), strides=(nv_rs, 1), offset=h * nv_hs)
    row0 = b * S
    if PAGE == 0:
        kd = tl.make_desc(k_cache, shape=(row0 + end, D), strides=(k_rs, 1), offset=h * k_hs)
        vd = tl.make_desc(v_cache, shape=(row0 + end, D), strides=(v_rs, 1), offset=h * v_hs)
    else:
        row0 = 0
        td = tl.make_desc(table, shape=(max_pages,), strides=(1,), offset=b * max_pages)
        kd = tl.make_desc(k_cache, shape=(end, D), strides=(k_rs, 1), offset=h * k_hs,
                          pages=td, num_pages=num_pages, page_size=PAGE)
        vd = tl.make_desc(v_cache, shape=(end, D), strides=(v_rs, 1), offset=h * v_hs,
                          pages=td, num_pages=num_pages, page_size=PAGE)
    i0 = pid * BLOCK
    tl.store(kd, (row0 + start + i0, 0), tl.load(kn, (b * SK + i0, 0), shape=(BLOCK, D)))
    tl.store(vd, (row0 + start + i0, 0), tl.load(vn, (b * SK + i0, 0), shape=(BLOCK, D)))


@jit
def rotary_kernel(x, out, cos, sin, seqlens, B, S, HX, SEQ_RO, x_rs: tl.constexpr,
                  x_hs: tl.constexpr, D: tl.constexpr, R: tl.constexpr, BLOCK: tl.constexpr,
                  INTERLEAVED: tl.constexpr, PER_TOKEN: tl.constexpr):
    # Grid (⌈S/BLOCK⌉, B·HX): rows of x [B, S, HX, D] (strided) rotated into out (contiguous
    # [B, S, HX, D]) by cos/sin [SEQ_RO, R/2] at positions seqlens[b] + i (PER_TOKEN) or
    # seqlens[b]; columns past R copied. Pairs (j, j + R/2), or (2j, 2j + 1) INTERLEAVED.
    pid, bh = block_and_row(tl.cdiv(S, BLOCK))
    b = bh // HX
    h = bh % HX
    sd = tl.make_desc(seqlens, shape=(B,), strides=(1,))
    start = tl.maximum(tl.load_scalar(sd, (b,)), 0)
    H2 = R // 2
    i0 = pid * BLOCK
    r0 = b * S + i0                              # the rows of batch b (as the append kernel's)
    rows = (b + 1) * S
    cd = tl.make_desc(cos, shape=(SEQ_RO, H2), strides=(H2, 1))
    snd = tl.make_desc(sin, shape=(SEQ_RO, H2), strides=(H2, 1))
    if PER_TOKEN:
        c = tl.load(cd, (start + i0, 0), shape=(BLOCK, H2)).to(tl.float32)
        sn = tl.load(snd, (start + i0, 0), shape=(BLOCK, H2)).to(tl.float32)
    else:
        c = tl.broadcast_to(tl.load(cd, (start, 0), shape=(1, H2)).to(tl.float32), (BLOCK, H2))
        sn = tl.broadcast_to(tl.load(snd, (start, 0), shape=(1, H2)).to(tl.float32),
                             (BLOCK, H2))
    # The two halves of each pair as views of x and out: columns j and j + R/2, or 2j, 2j + 1.
    step = 2 if INTERLEAVED else 1
    second = 1 if INTERLEAVED else H2
    x1d = tl.make_desc(x, shape=(rows, H2), strides=(x_rs, step), offset=h * x_hs)
    x2d = tl.make_desc(x, shape=(rows, H2), strides=(x_rs, step), offset=h * x_hs + second)
    o1d = tl.make_desc(out, shape=(rows, H2), strides=(HX * D, step), offset=h * D)
    o2d = tl.make_desc(out, shape=(rows, H2), strides=(HX * D, step), offset=h * D + second)
    x1 = tl.load(x1d, (r0, 0), shape=(BLOCK, H2))
    x2 = tl.load(x2d, (r0, 0), shape=(BLOCK, H2))
    a = x1.to(tl.float32)
    bb = x2.to(tl.float32)
    tl.store(o1d, (r0, 0), (a * c - bb * sn).to(x1.dtype))
    tl.store(o2d, (r0, 0), (bb * c + a * sn).to(x1.dtype))
    copy_columns(x, out, rows, h * x_hs, h * D, x_rs, HX * D, r0, R, D - R, BLOCK)


@jit
def copy_columns(x, out, rows, base, obase, x_rs, o_rs, r0, C0: tl.constexpr, N: tl.constexpr,
                 BLOCK: tl.constexpr):
    """Columns [C0, C0 + N) of rows [r0, r0 + BLOCK) (below `rows`) of x to out, in
    power-of-two chunks."""
    if N > 0:
        W = pow(2, int(math.log2(N)))
        src = tl.make_desc(x, shape=(rows, C0 + W), strides=(x_rs, 1), offset=base)
        dst = tl.make_desc(out, shape=(rows, C0 + W), strides=(o_rs, 1), offset=obase)
        tl.store(dst, (r0, C0), tl.load(src, (r0, C0), shape=(BLOCK, W)))
        copy_columns(x, out, rows, base, obase, x_rs, o_rs, r0, C0 + W, N - W, BLOCK)


def append(fn, kind, k, v, k_cache, v_cache, given_caches, cache_strides, seqlens, table,
           paged, B, Hkv, D, page, max_pages, limit, rotary=None):
    """Writes k and v ([B, Sk, Hkv, D]) into the cache (k_cache, v_cache: the caches as the
    kernels read them, with their (k_rs, k_hs, v_rs, v_hs) `cache_strides`; `given_caches` as
    the caller gave them) at each sequence's seqlens[b],
    k rotated first where `rotary` = (cos, sin, interleaved) is given. Returns the lengths the
    attention then takes, seqlens + Sk (a new array or tensor), and `again(k, v, k_cache,
    v_cache, seqlens, table, cos, sin)`: the same launches, without the checks, for another call
    of this one's signature (serving's plans)."""
    if (k is None) != (v is None):
        raise ValueError(f"tessel.{fn}: k and v (new keys and values) come together")
    _gate(fn, kind, "k=, v=")
    named = (("k_cache", k_cache), ("k", k), ("v", v))
    _kind(fn, named)
    _check_same_dtype(fn, named)
    for name, x in (("k", k), ("v", v)):
        if len(x.shape) != 4 or tuple(x.shape[:1]) + tuple(x.shape[2:]) != (B, Hkv, D) or \
                x.shape[1] != k.shape[1]:
            raise ValueError(f"tessel.{fn}: {name} must have shape [B, Sk, Hkv, D] = "
                             f"[{B}, Sk, {Hkv}, {D}] (k and v the same), got {tuple(x.shape)}")
    for name, x, mine in zip(("k_cache", "v_cache"), given_caches, (k_cache, v_cache)):
        if x is not mine:
            raise ValueError(f"tessel.{fn}: {name} is written in place with k and v, so it must "
                             "be laid out as the kernels read it (contiguous rows, heads and "
                             f"head dim, 16-byte aligned); got strides {_strides(x)}")
    SK = int(k.shape[1])
    if kind == "numpy" and B and ((seqlens + SK) > limit).any():
        bad = int(np.argmax(seqlens + SK > limit))
        raise ValueError(f"tessel.{fn}: cache_seqlens[{bad}] = {int(seqlens[bad])} plus {SK} "
                         f"new keys is more than the {limit} the cache holds per sequence")
    turn = None
    if rotary is not None:
        k, turn = rotate(fn, kind, "k", k, *rotary, seqlens, True)
    given = (k, v)
    (k, n_rs, n_hs), (v, nv_rs, nv_hs) = _strided(k), _strided(v)
    copied = (k is not given[0], v is not given[1])
    k_rs, k_hs, v_rs, v_hs = cache_strides
    num_pages = k_cache.shape[0] if paged else 0
    block = 64 if D <= 128 else 32
    grid = fold_grid(-(-SK // block), B * Hkv)
    scalars = (B, SK, Hkv, k_cache.shape[1], limit, num_pages, max_pages)
    cx = dict(n_rs=n_rs, n_hs=n_hs, nv_rs=nv_rs, nv_hs=nv_hs, k_rs=k_rs, k_hs=k_hs, v_rs=v_rs,
              v_hs=v_hs, D=D, BLOCK=block, PAGE=page)

    def launch(k, v, k_cache, v_cache, seqlens, table):
        _launch(kvcache_append_kernel, grid, (k, v, k_cache, v_cache, seqlens, table) + scalars,
                cx)
        return seqlens + np.int32(SK) if kind == "numpy" else seqlens + SK

    def again(k, v, k_cache, v_cache, seqlens, table, cos, sin):
        if turn is not None:
            k = turn(k, cos, sin, seqlens)
        k, v = (x.contiguous() if c else x for x, c in zip((k, v), copied))
        return launch(k, v, k_cache, v_cache, seqlens, table)
    return launch(k, v, k_cache, v_cache, seqlens, table), again


def rotate(fn, kind, name, x, cos, sin, interleaved, seqlens, per_token):
    """x (the caller's `name`) [B, S, heads, D] rotated by FlashAttention's rotary tables cos,
    sin [seqlen_ro, R/2] at positions seqlens[b] + i (per_token) or seqlens[b]: a new
    contiguous array or tensor (columns past R as in x), and `again(x, cos, sin, seqlens)`,
    the same launch without the checks for another call of this one's signature."""
    B, S, HX, D = x.shape
    if cos is None or sin is None:
        raise ValueError(f"tessel.{fn}: rotary_cos and rotary_sin come together")
    _gate(fn, kind, "rotary_cos, rotary_sin")
    named = ((name, x), ("rotary_cos", cos), ("rotary_sin", sin))
    _kind(fn, named)
    if len(cos.shape) != 2 or tuple(sin.shape) != tuple(cos.shape):
        raise ValueError(f"tessel.{fn}: rotary_cos and rotary_sin must both be [seqlen_ro, "
                         f"rotary_dim / 2], got {tuple(cos.shape)} and {tuple(sin.shape)}")
    seq_ro, R = int(cos.shape[0]), 2 * int(cos.shape[1])
    if R % 16 or not 0 < R <= D:
        raise ValueError(f"tessel.{fn}: rotary_dim (2 × rotary_cos.shape[1] = {R}) must be a "
                         f"multiple of 16 and at most the head dim {D}")
    last = S if per_token else 1
    if kind == "numpy" and B and int(seqlens.max()) + last > seq_ro:
        raise ValueError(f"tessel.{fn}: rotary_cos has {seq_ro} positions; the new tokens "
                         f"reach position {int(seqlens.max()) + last - 1}")
    given = x
    x, x_rs, x_hs = _strided(x)
    copied = x is not given
    grid = fold_grid(-(-S // 64), B * HX)
    cx = dict(x_rs=x_rs, x_hs=x_hs, D=D, R=R, BLOCK=64, INTERLEAVED=bool(interleaved),
              PER_TOKEN=bool(per_token))

    def launch(x, cos, sin, seqlens):
        cos, sin = (np.ascontiguousarray(t) if kind == "numpy" else t.contiguous()
                    for t in (cos, sin))
        out = np.empty((B, S, HX, D), x.dtype) if kind == "numpy" else \
            x.new_empty((B, S, HX, D))
        _launch(rotary_kernel, grid, (x, out, cos, sin, seqlens, B, S, HX, seq_ro), cx)
        return out

    def again(x, cos, sin, seqlens):
        return launch(x.contiguous() if copied else x, cos, sin, seqlens)
    return launch(x, cos, sin, seqlens), again


def _strides(x):
    return tuple(x.stride()) if hasattr(x, "stride") and callable(x.stride) else \
        tuple(s // x.itemsize for s in x.strides)
