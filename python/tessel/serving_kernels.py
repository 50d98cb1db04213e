"""The serving kernels in the DSL: attention over packed variable-length sequences and over a
KV cache (contiguous or paged). python/tessel/serving.py checks the inputs and launches them.

Both read their sequence's bounds with tl.load_scalar (cu_seqlens[b], cache_seqlens[b],
block_table[b, j // PAGE]) and address the packed BSHD-like tensors through their strides: row
r, head h of q starts at r·q_rs + h·q_hs (H·D and D when packed), the head dim has stride 1.
The output o is packed [rows, H, D]. The strides are compile-time values: the fast paths copy
rows in 16-byte chunks and need them as constants (a specialisation per layout, as per head
dim). A descriptor covers the rows
[0, end) of the whole tensor and the kernel loads at `start + i`, so row indices stay small i32
(the lowerings compute addresses in 64 bits) and rows past the sequence's end read as 0.
Indices read from memory are clamped first, so bad lengths or page numbers never address memory
outside the tensors: a page number outside [0, num_pages) reads zeros.

Causal masks are bottom-right aligned (FlashAttention's convention): query i of a sequence of
nq queries and nk keys sees key j when i + nk - nq >= j.

Grid: (query blocks of the longest sequence, B·H), folded by grid.fold_grid past 65,535 rows.
"""
from . import language as tl
from .jit import jit


@jit
def varlen_kernel(q, k, v, o, lse_out, cu_q, cu_k, B, total_q, total_k, H, HKV, max_nq, scale,
                  q_rs: tl.constexpr, q_hs: tl.constexpr, k_rs: tl.constexpr,
                  k_hs: tl.constexpr, v_rs: tl.constexpr, v_hs: tl.constexpr, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  CAUSAL: tl.constexpr):
    n_blocks = tl.cdiv(max_nq, BLOCK_M)
    pid_m = tl.program_id(0) % n_blocks
    bh = tl.program_id(0) // n_blocks * tl.num_programs(1) + tl.program_id(1)
    b = bh // H
    h = bh % H
    kv_h = h // (H // HKV)
    cqd = tl.make_desc(cu_q, shape=(B + 1,), strides=(1,))
    ckd = tl.make_desc(cu_k, shape=(B + 1,), strides=(1,))
    q0 = tl.maximum(tl.load_scalar(cqd, (b,)), 0)
    q_end = tl.minimum(tl.load_scalar(cqd, (b + 1,)), total_q)
    k0 = tl.maximum(tl.load_scalar(ckd, (b,)), 0)
    k_end = tl.minimum(tl.load_scalar(ckd, (b + 1,)), total_k)
    nq = q_end - q0
    nk = k_end - k0
    qd = tl.make_desc(q, shape=(q_end, D), strides=(q_rs, 1), offset=h * q_hs)
    kd = tl.make_desc(k, shape=(k_end, D), strides=(k_rs, 1), offset=kv_h * k_hs)
    vd = tl.make_desc(v, shape=(k_end, D), strides=(v_rs, 1), offset=kv_h * v_hs)
    od = tl.make_desc(o, shape=(q_end, D), strides=(H * D, 1), offset=h * D)
    ld = tl.make_desc(lse_out, shape=(q_end,), strides=(1,), offset=h * total_q)   # [H, total_q]

    m0 = pid_m * BLOCK_M
    qt = tl.load(qd, (q0 + m0, 0), shape=(BLOCK_M, D))
    # Bottom-right causal: query i sees keys up to i + nk - nq.
    q_idx = tl.broadcast_to((m0 + (nk - nq) + tl.arange(0, BLOCK_M))[:, None], (BLOCK_M, BLOCK_N))
    acc = tl.zeros((BLOCK_M, D), tl.float32)
    lse = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    for j in tl.stream(k0, k_end, BLOCK_N):      # the induction variable is the row: a plain load
        kt = tl.load(kd, (j, 0), shape=(BLOCK_N, D))
        s = tl.dot(qt, kt.T) * scale
        kv_idx = tl.broadcast_to((j - k0 + tl.arange(0, BLOCK_N))[None, :], (BLOCK_M, BLOCK_N))
        mask = kv_idx < nk
        if CAUSAL:
            mask = mask & (q_idx >= kv_idx)
        s = tl.where(mask, s, float("-inf"))
        p, lse = tl.softmax(s, axis=1, return_lse=True)
        vt = tl.load(vd, (j, 0), shape=(BLOCK_N, D))
        acc += tl.dot(p.to(vt.dtype), vt)
    tl.store(od, (q0 + m0, 0), acc.to(qt.dtype))
    tl.store(ld, (q0 + m0,), lse)


@jit
def kvcache_kernel(q, k_cache, v_cache, o, lse_out, seqlens, table, B, nq, cache_rows, H, HKV,
                   max_pages, scale, q_rs: tl.constexpr, q_hs: tl.constexpr,
                   k_rs: tl.constexpr, k_hs: tl.constexpr, v_rs: tl.constexpr,
                   v_hs: tl.constexpr, D: tl.constexpr, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr, PAGE: tl.constexpr, CAUSAL: tl.constexpr):
    """q [B, nq, H, D]; the cache [B, S, Hkv, D] (PAGE = 0, cache_rows = S) or
    [num_pages, PAGE, Hkv, D] with table [B, max_pages] (cache_rows = num_pages·PAGE)."""
    n_blocks = tl.cdiv(nq, BLOCK_M)
    pid_m = tl.program_id(0) % n_blocks
    bh = tl.program_id(0) // n_blocks * tl.num_programs(1) + tl.program_id(1)
    b = bh // H
    h = bh % H
    kv_h = h // (H // HKV)
    sd = tl.make_desc(seqlens, shape=(B,), strides=(1,))
    nk = tl.maximum(tl.load_scalar(sd, (b,)), 0)
    k0 = 0
    if PAGE == 0:
        nk = tl.minimum(nk, cache_rows)
        k0 = b * cache_rows                     # this sequence's first row of the cache
    else:
        nk = tl.minimum(nk, max_pages * PAGE)
    q0 = b * nq
    qd = tl.make_desc(q, shape=(q0 + nq, D), strides=(q_rs, 1), offset=h * q_hs)
    od = tl.make_desc(o, shape=(q0 + nq, D), strides=(H * D, 1), offset=h * D)
    ld = tl.make_desc(lse_out, shape=(nq,), strides=(1,), offset=bh * nq)     # [B, H, nq]
    # Contiguous: rows [k0, k0 + nk) of the cache, the rest reads as 0.
    kd = tl.make_desc(k_cache, shape=(k0 + nk, D), strides=(k_rs, 1), offset=kv_h * k_hs)
    vd = tl.make_desc(v_cache, shape=(k0 + nk, D), strides=(v_rs, 1), offset=kv_h * v_hs)
    td = tl.make_desc(table, shape=(B, max_pages), strides=(max_pages, 1))

    m0 = pid_m * BLOCK_M
    qt = tl.load(qd, (q0 + m0, 0), shape=(BLOCK_M, D))
    q_idx = tl.broadcast_to((m0 + (nk - nq) + tl.arange(0, BLOCK_M))[:, None], (BLOCK_M, BLOCK_N))
    acc = tl.zeros((BLOCK_M, D), tl.float32)
    lse = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    for r in tl.stream(k0, k0 + nk, BLOCK_N):
        j = r - k0                              # the key position in the sequence
        if PAGE == 0:
            kt = tl.load(kd, (r, 0), shape=(BLOCK_N, D))
            vt = tl.load(vd, (r, 0), shape=(BLOCK_N, D))
        else:
            # BLOCK_N divides PAGE, so the block lies in one page. Its descriptor ends at the
            # sequence's last key (rows past it in the page may hold anything, even NaN) and is
            # empty for a page number outside the cache (-1 where the table is out of range).
            page = tl.load_scalar(td, (b, j // PAGE), padding=-1)
            ok = (page >= 0) & (page < cache_rows // PAGE)
            row = tl.where(ok, page * PAGE + j % PAGE, 0)
            end = tl.where(ok, row + tl.minimum(nk - j, BLOCK_N), 0)
            kp = tl.make_desc(k_cache, shape=(end, D), strides=(k_rs, 1), offset=kv_h * k_hs)
            vp = tl.make_desc(v_cache, shape=(end, D), strides=(v_rs, 1), offset=kv_h * v_hs)
            kt = tl.load(kp, (row, 0), shape=(BLOCK_N, D))
            vt = tl.load(vp, (row, 0), shape=(BLOCK_N, D))
        s = tl.dot(qt, kt.T) * scale
        kv_idx = tl.broadcast_to((j + tl.arange(0, BLOCK_N))[None, :], (BLOCK_M, BLOCK_N))
        mask = kv_idx < nk
        if CAUSAL:
            mask = mask & (q_idx >= kv_idx)
        s = tl.where(mask, s, float("-inf"))
        p, lse = tl.softmax(s, axis=1, return_lse=True)
        acc += tl.dot(p.to(vt.dtype), vt)
    tl.store(od, (q0 + m0, 0), acc.to(qt.dtype))
    tl.store(ld, (m0,), lse)
