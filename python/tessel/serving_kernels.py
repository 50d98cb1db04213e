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

Grid: (query blocks of the longest sequence, B·H), folded by grid.fold_grid past 65,535 rows;
or, TILES, (the batch's query blocks, H): program p of a head takes the sequence tiles[p] - 1
names (serving_checks.varlen_tile_map), so a batch of a long and many short sequences launches about
total_q / BLOCK_M + B programs a head, not B times the longest one's blocks.

Decoding (few queries against a long cache) has two more programs, splitkv_kernel and
splitkv_combine (docs/dev/serving.md, "Split-KV decoding"): one program per (query block, key
split, batch, KV head) whose query rows are the group's heads × the query positions (GQA
packing: each KV head's keys are read once per split, not once per query head), writing a
float32 partial output and its LSE per split; then one program per (query block, batch, query
head) that merges the splits by their LSEs.
"""
from . import language as tl
from .grid import block_and_row
from .jit import jit


@jit
def sequence_span(cu, b, B, total):
    """The rows [start, end) of packed sequence b of B: cu_seqlens[b] and cu_seqlens[b + 1],
    clamped to the tensor's `total` rows."""
    cd = tl.make_desc(cu, shape=(B + 1,), strides=(1,))
    return tl.maximum(tl.load_scalar(cd, (b,)), 0), tl.minimum(tl.load_scalar(cd, (b + 1,)), total)


@jit
def key_span(cu, b, B, total, USED: tl.constexpr):
    """sequence_span of sequence b's keys. USED: cu holds the B + 1 cumulative lengths and then
    B key counts (FlashAttention-3's seqused_k: serving_checks.key_bounds), and the sequence's
    keys are the first that many rows of its span."""
    k0, k_end = sequence_span(cu, b, B, total)
    if USED:
        ud = tl.make_desc(cu, shape=(2 * B + 1,), strides=(1,))
        k_end = tl.minimum(k_end, k0 + tl.maximum(tl.load_scalar(ud, (B + 1 + b,)), 0))
    return k0, k_end


@jit
def varlen_program(cu, tiles, B, H, max_n, n_tiles, BLOCK: tl.constexpr, TILES: tl.constexpr,
                   LAST_FIRST: tl.constexpr = False):
    """(b, h, pid): this program's sequence, head and block of BLOCK rows of the sequences
    `cu` spans (queries, or keys for the backward's key blocks). TILES: sequence b owns programs
    cu[b] // BLOCK + b onwards (one more than its blocks at most), tiles[p] counts the
    sequences owning p or less; a block number the map does not give (bad cu_seqlens) is moved
    past every sequence, to a block that computes and stores nothing. LAST_FIRST: the programs
    launched first take the last blocks (causal dQ's longest)."""
    if TILES:
        p, h = block_and_row(n_tiles)
        if LAST_FIRST:
            p = n_tiles - 1 - p
        td = tl.make_desc(tiles, shape=(n_tiles,), strides=(1,))
        b = tl.minimum(tl.maximum(tl.load_scalar(td, (p,)) - 1, 0), B - 1)
        cd = tl.make_desc(cu, shape=(B + 1,), strides=(1,))
        pid = p - tl.maximum(tl.load_scalar(cd, (b,)), 0) // BLOCK - b
        pid = tl.where(pid < 0, n_tiles, pid)
    else:
        pid, bh = block_and_row(tl.cdiv(max_n, BLOCK))
        if LAST_FIRST:
            pid = tl.cdiv(max_n, BLOCK) - 1 - pid
        b = bh // H
        h = bh % H
    return b, h, pid


@jit
def varlen_kernel(q, k, v, o, lse_out, cu_q, cu_k, B, total_q, total_k, H, HKV, max_nq, scale,
                  tiles, n_tiles, q_rs: tl.constexpr, q_hs: tl.constexpr, k_rs: tl.constexpr,
                  k_hs: tl.constexpr, v_rs: tl.constexpr, v_hs: tl.constexpr, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  CAUSAL: tl.constexpr, SCORE_MOD: tl.constexpr = None,
                  MASK_MOD: tl.constexpr = None, DV: tl.constexpr = 0, DB: tl.constexpr = 0,
                  TILES: tl.constexpr = False, USED_K: tl.constexpr = False):
    # DV: v's and o's head dim where it is not D (0: D), as attention_tile's. DB: the blocks'
    # head dim where it is not D (0: D), as kvcache_kernel's: columns past D read as 0, o
    # stored D wide (padding without copying q, k and v; with DV 0). TILES: varlen_program's.
    # USED_K: cu_k ends with seqused_k (key_span).
    DO = D if DV == 0 else DV
    W = D if DB == 0 else DB
    WO = DO if DB == 0 else DB
    b, h, pid_m = varlen_program(cu_q, tiles, B, H, max_nq, n_tiles, BLOCK_M, TILES)
    kv_h = h // (H // HKV)
    q0, q_end = sequence_span(cu_q, b, B, total_q)
    k0, k_end = key_span(cu_k, b, B, total_k, USED_K)
    nq = q_end - q0
    nk = k_end - k0
    qd = tl.make_desc(q, shape=(q_end, D), strides=(q_rs, 1), offset=h * q_hs)
    kd = tl.make_desc(k, shape=(k_end, D), strides=(k_rs, 1), offset=kv_h * k_hs)
    vd = tl.make_desc(v, shape=(k_end, DO), strides=(v_rs, 1), offset=kv_h * v_hs)
    od = tl.make_desc(o, shape=(q_end, DO), strides=(H * DO, 1), offset=h * DO)
    ld = tl.make_desc(lse_out, shape=(q_end,), strides=(1,), offset=h * total_q)   # [H, total_q]

    m0 = pid_m * BLOCK_M
    qt = tl.load(qd, (q0 + m0, 0), shape=(BLOCK_M, W))
    # Bottom-right causal: query i sees keys up to i + nk - nq.
    q_idx = tl.broadcast_to((m0 + (nk - nq) + tl.arange(0, BLOCK_M))[:, None], (BLOCK_M, BLOCK_N))
    acc = tl.zeros((BLOCK_M, WO), tl.float32)
    lse = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    # The grid covers the longest sequence: a query block past this one's rows has an empty key
    # loop (it would otherwise stream every key of the sequence for rows it never stores).
    k_stop = k0 + tl.minimum(tl.maximum(nq - m0, 0), 1) * nk
    for j in tl.stream(k0, k_stop, BLOCK_N):     # the induction variable is the row: a plain load
        kt = tl.load(kd, (j, 0), shape=(BLOCK_N, W))
        s = tl.dot(qt, kt.T) * scale
        kv_idx = tl.broadcast_to((j - k0 + tl.arange(0, BLOCK_N))[None, :], (BLOCK_M, BLOCK_N))
        if SCORE_MOD is not None:
            s = SCORE_MOD(s, b, h, q_idx, kv_idx)
        mask = kv_idx < nk
        if CAUSAL:
            mask = mask & (q_idx >= kv_idx)
        if MASK_MOD is not None:
            mask = mask & MASK_MOD(b, h, q_idx, kv_idx)
        s = tl.where(mask, s, float("-inf"))
        p, lse = tl.softmax(s, axis=1, return_lse=True)
        vt = tl.load(vd, (j, 0), shape=(BLOCK_N, WO))
        acc += tl.dot(p.to(vt.dtype), vt)
    tl.store(od, (q0 + m0, 0), acc.to(qt.dtype))
    tl.store(ld, (q0 + m0,), lse)


@jit
def left_padding(starts, b, B, nk):
    """starts[b] (cache_leftpad) clamped to [0, nk]: where sequence b's keys begin."""
    pd = tl.make_desc(starts, shape=(B,), strides=(1,))
    return tl.minimum(tl.maximum(tl.load_scalar(pd, (b,)), 0), nk)


@jit
def load_paged_kv(k_cache, v_cache, td, b, j, nk, cache_rows, kv_h, k_rs: tl.constexpr,
                  k_hs: tl.constexpr, v_rs: tl.constexpr, v_hs: tl.constexpr, D: tl.constexpr,
                  BLOCK_N: tl.constexpr, PAGE: tl.constexpr, W: tl.constexpr):
    """The [BLOCK_N, W] K and V blocks of keys j .. j + BLOCK_N - 1 of sequence b, KV head kv_h,
    from a paged cache [num_pages, PAGE, HKV, D] (cache_rows = num_pages·PAGE) through the
    page table's descriptor td [B, max_pages]; the block's page is looked up here, so the loads'
    rows are data-dependent. Inlined into kvcache_kernel and splitkv_kernel.

    BLOCK_N divides PAGE, so the block lies in one page. Its descriptor ends at the sequence's
    last key nk - 1 (rows past it in the page may hold anything, even NaN) and is empty for a
    page number outside the cache (-1 where the table is out of range): those rows read as 0, as
    do columns D .. W - 1 (W: the kernels' block head dim, DB)."""
    page = tl.load_scalar(td, (b, j // PAGE), padding=-1)
    ok = (page >= 0) & (page < cache_rows // PAGE)
    row = tl.where(ok, page * PAGE + j % PAGE, 0)
    end = tl.where(ok, row + tl.minimum(nk - j, BLOCK_N), 0)
    kp = tl.make_desc(k_cache, shape=(end, D), strides=(k_rs, 1), offset=kv_h * k_hs)
    vp = tl.make_desc(v_cache, shape=(end, D), strides=(v_rs, 1), offset=kv_h * v_hs)
    return tl.load(kp, (row, 0), shape=(BLOCK_N, W)), tl.load(vp, (row, 0), shape=(BLOCK_N, W))


@jit
def paged_views(k_cache, v_cache, table, b, nk, cache_rows, max_pages, kv_h, k_rs: tl.constexpr,
                k_hs: tl.constexpr, v_rs: tl.constexpr, v_hs: tl.constexpr, D: tl.constexpr,
                PAGE: tl.constexpr):
    """Paged views [nk, D] of keys and values of sequence b, KV head kv_h, in a cache
    [num_pages, PAGE, HKV, D] (cache_rows = num_pages·PAGE) with table [B, max_pages]: each row
    is looked up in the page table, so a key block may span pages (pages shorter than a block,
    or not a multiple of it). Page numbers outside the cache read as 0. Inlined into
    kvcache_kernel and splitkv_kernel."""
    tb = tl.make_desc(table, shape=(max_pages,), strides=(1,), offset=b * max_pages)
    pages = cache_rows // PAGE
    kd = tl.make_desc(k_cache, shape=(nk, D), strides=(k_rs, 1), offset=kv_h * k_hs, pages=tb,
                      num_pages=pages, page_size=PAGE)
    vd = tl.make_desc(v_cache, shape=(nk, D), strides=(v_rs, 1), offset=kv_h * v_hs, pages=tb,
                      num_pages=pages, page_size=PAGE)
    return kd, vd


@jit
def cache_key_loop(qt, q_idx, k_cache, v_cache, table, b, h, kv_h, nk, k0, first, last,
                   cache_rows, B, max_pages, scale, k_rs: tl.constexpr, k_hs: tl.constexpr,
                   v_rs: tl.constexpr, v_hs: tl.constexpr, D: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PAGE: tl.constexpr,
                   CAUSAL: tl.constexpr, SCORE_MOD: tl.constexpr, MASK_MOD: tl.constexpr,
                   W: tl.constexpr, ROWS: tl.constexpr):
    """The key loop of kvcache_kernel and varlen_cache_kernel: the query block qt [BLOCK_M, W]
    (positions q_idx, bottom-right aligned) against keys j = r - k0 of sequence b for cache rows
    r in [first, last), of nk keys (rows past them read as 0), KV head kv_h; returns the
    float32 output block [BLOCK_M, W] and its LSE. The cache: contiguous [B, S, HKV, D]
    (PAGE = 0; sequence b's rows from k0 = b·S) or paged [num_pages, PAGE, HKV, D] with table
    [B, max_pages] (k0 = 0), read a key block's page at a time (load_paged_kv) unless ROWS: a
    row's page at a time (paged_views), for pages that BLOCK_N does not divide or blocks that
    do not start at a multiple of it."""
    td = tl.make_desc(table, shape=(B, max_pages), strides=(max_pages, 1))
    if ROWS and PAGE != 0:
        kd, vd = paged_views(k_cache, v_cache, table, b, nk, cache_rows, max_pages, kv_h, k_rs,
                             k_hs, v_rs, v_hs, D, PAGE)
    else:
        # Contiguous: rows [k0, k0 + nk) of the cache, the rest reads as 0 (pages of whole key
        # blocks are read by load_paged_kv instead).
        kd = tl.make_desc(k_cache, shape=(k0 + nk, D), strides=(k_rs, 1), offset=kv_h * k_hs)
        vd = tl.make_desc(v_cache, shape=(k0 + nk, D), strides=(v_rs, 1), offset=kv_h * v_hs)
    acc = tl.zeros((BLOCK_M, W), tl.float32)
    lse = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    for r in tl.stream(first, last, BLOCK_N):
        j = r - k0                              # the key position in the sequence
        if ROWS or PAGE == 0:
            kt = tl.load(kd, (r, 0), shape=(BLOCK_N, W))
            vt = tl.load(vd, (r, 0), shape=(BLOCK_N, W))
        else:
            kt, vt = load_paged_kv(k_cache, v_cache, td, b, j, nk, cache_rows, kv_h, k_rs, k_hs,
                                   v_rs, v_hs, D, BLOCK_N, PAGE, W)
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
        p, lse = tl.softmax(s, axis=1, return_lse=True)
        acc += tl.dot(p.to(vt.dtype), vt)
    return acc, lse


@jit
def cache_keys(seqlens, b, B, cache_rows, max_pages, PAGE: tl.constexpr):
    """(nk, k0): sequence b's key count seqlens[b], clamped to what the cache holds, and its
    first row (b·cache_rows of a contiguous cache, PAGE = 0; 0 of a paged one)."""
    sd = tl.make_desc(seqlens, shape=(B,), strides=(1,))
    nk = tl.maximum(tl.load_scalar(sd, (b,)), 0)
    k0 = 0
    if PAGE == 0:
        nk = tl.minimum(nk, cache_rows)
        k0 = b * cache_rows                     # this sequence's first row of the cache
    else:
        nk = tl.minimum(nk, max_pages * PAGE)
    return nk, k0


@jit
def kvcache_kernel(q, k_cache, v_cache, o, lse_out, seqlens, table, B, nq, cache_rows, H, HKV,
                   max_pages, scale, starts, q_rs: tl.constexpr, q_hs: tl.constexpr,
                   k_rs: tl.constexpr, k_hs: tl.constexpr, v_rs: tl.constexpr,
                   v_hs: tl.constexpr, D: tl.constexpr, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr, PAGE: tl.constexpr, CAUSAL: tl.constexpr,
                   SCORE_MOD: tl.constexpr = None, MASK_MOD: tl.constexpr = None,
                   DB: tl.constexpr = 0, LEFTPAD: tl.constexpr = False):
    """q [B, nq, H, D]; the cache [B, S, Hkv, D] (PAGE = 0, cache_rows = S) or
    [num_pages, PAGE, Hkv, D] with table [B, max_pages] (cache_rows = num_pages·PAGE).

    LEFTPAD: sequence b's keys start at starts[b] (FlashAttention's cache_leftpad; positions
    stay the cache's): the key loop starts there, so the rows before it are never read (a
    cache's unwritten rows may hold NaN, which a mask would not keep out of P·V). Its blocks
    then need not align with pages: a paged cache is read a row's page at a time
    (paged_views). Without LEFTPAD `starts` is not read (any int32 buffer).

    DB: the blocks' head dim where it is not D (0: D), a head dim the fast paths take above D:
    q, K and V blocks read columns D .. DB - 1 as 0 and o's store leaves them out, so a cache
    of another head dim (96, 80, 192) runs the fast paths' kernels without being copied."""
    W = D if DB == 0 else DB
    pid_m, bh = block_and_row(tl.cdiv(nq, BLOCK_M))
    b = bh // H
    h = bh % H
    kv_h = h // (H // HKV)
    nk, k0 = cache_keys(seqlens, b, B, cache_rows, max_pages, PAGE)
    q0 = b * nq
    qd = tl.make_desc(q, shape=(q0 + nq, D), strides=(q_rs, 1), offset=h * q_hs)
    od = tl.make_desc(o, shape=(q0 + nq, D), strides=(H * D, 1), offset=h * D)
    ld = tl.make_desc(lse_out, shape=(nq,), strides=(1,), offset=bh * nq)     # [B, H, nq]
    m0 = pid_m * BLOCK_M
    qt = tl.load(qd, (q0 + m0, 0), shape=(BLOCK_M, W))
    q_idx = tl.broadcast_to((m0 + (nk - nq) + tl.arange(0, BLOCK_M))[:, None], (BLOCK_M, BLOCK_N))
    first = k0
    if LEFTPAD:
        first = k0 + left_padding(starts, b, B, nk)
    acc, lse = cache_key_loop(qt, q_idx, k_cache, v_cache, table, b, h, kv_h, nk, k0, first,
                              k0 + nk, cache_rows, B, max_pages, scale, k_rs, k_hs, v_rs, v_hs,
                              D, BLOCK_M, BLOCK_N, PAGE, CAUSAL, SCORE_MOD, MASK_MOD, W,
                              PAGE % BLOCK_N != 0 or LEFTPAD)
    tl.store(od, (q0 + m0, 0), acc.to(qt.dtype))
    tl.store(ld, (m0,), lse)


@jit
def varlen_cache_kernel(q, k_cache, v_cache, o, lse_out, cu_q, seqlens, table, B, total_q,
                        max_nq, cache_rows, H, HKV, max_pages, scale, tiles, n_tiles,
                        q_rs: tl.constexpr,
                        q_hs: tl.constexpr, k_rs: tl.constexpr, k_hs: tl.constexpr,
                        v_rs: tl.constexpr, v_hs: tl.constexpr, D: tl.constexpr,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PAGE: tl.constexpr,
                        CAUSAL: tl.constexpr, SCORE_MOD: tl.constexpr = None,
                        MASK_MOD: tl.constexpr = None, DB: tl.constexpr = 0,
                        SKIP_SINGLE: tl.constexpr = False, TILES: tl.constexpr = False):
    """Packed queries of sequences of mixed lengths against a KV cache (FlashAttention's
    flash_attn_varlen_func with block_table: prefill chunks beside decode steps in one launch).

    q and o [total_q, H, D] packed as varlen_kernel's (sequence b's queries at rows cu_q[b] to
    cu_q[b + 1] - 1, read through q's strides), lse [H, total_q]; the keys as kvcache_kernel's
    (seqlens[b] of them, contiguous or paged with table), causal bottom-right aligned. Grid
    (query blocks of the longest sequence, max_nq rows, B·H): a block past its sequence's
    queries runs no key loop and stores nothing. DB as kvcache_kernel's. SKIP_SINGLE: sequences
    of exactly one query (decode steps) are left alone, as if they had none — splitkv_kernel's
    VARLEN_Q launch computes them (the mixed batch's two launches, varlen_cache.py). TILES:
    varlen_program's."""
    W = D if DB == 0 else DB
    b, h, pid_m = varlen_program(cu_q, tiles, B, H, max_nq, n_tiles, BLOCK_M, TILES)
    kv_h = h // (H // HKV)
    nk, k0 = cache_keys(seqlens, b, B, cache_rows, max_pages, PAGE)
    q0, q_end = sequence_span(cu_q, b, B, total_q)
    if SKIP_SINGLE:                 # a sequence of one query is the split program's: no rows
        q_end = tl.where(q_end - q0 == 1, q0, q_end)
    nq = q_end - q0
    qd = tl.make_desc(q, shape=(q_end, D), strides=(q_rs, 1), offset=h * q_hs)
    od = tl.make_desc(o, shape=(q_end, D), strides=(H * D, 1), offset=h * D)
    ld = tl.make_desc(lse_out, shape=(q_end,), strides=(1,), offset=h * total_q)   # [H, total_q]
    m0 = pid_m * BLOCK_M
    qt = tl.load(qd, (q0 + m0, 0), shape=(BLOCK_M, W))
    q_idx = tl.broadcast_to((m0 + (nk - nq) + tl.arange(0, BLOCK_M))[:, None], (BLOCK_M, BLOCK_N))
    last = k0 + tl.minimum(tl.maximum(nq - m0, 0), 1) * nk
    acc, lse = cache_key_loop(qt, q_idx, k_cache, v_cache, table, b, h, kv_h, nk, k0, k0, last,
                              cache_rows, B, max_pages, scale, k_rs, k_hs, v_rs, v_hs, D,
                              BLOCK_M, BLOCK_N, PAGE, CAUSAL, SCORE_MOD, MASK_MOD, W,
                              PAGE % BLOCK_N != 0)
    tl.store(od, (q0 + m0, 0), acc.to(qt.dtype))
    tl.store(ld, (q0 + m0,), lse)


@jit
def splitkv_kernel(q, k_cache, v_cache, o, lse_out, seqlens, table, B, SQ, G, cache_rows, HKV,
                   max_pages, scale, n_splits, q_b, q_g, o_s, o_b, o_g, l_s, l_b, l_g, starts,
                   cu_q, total_q, QR: tl.constexpr, OR: tl.constexpr, k_rs: tl.constexpr,
                   k_hs: tl.constexpr, v_rs: tl.constexpr, v_hs: tl.constexpr, D: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PAGE: tl.constexpr,
                   CAUSAL: tl.constexpr, DIRECT: tl.constexpr, SCORE_MOD: tl.constexpr = None,
                   MASK_MOD: tl.constexpr = None, DB: tl.constexpr = 0,
                   LEFTPAD: tl.constexpr = False, VARLEN_Q: tl.constexpr = False):
    """One key split of one KV head's query group against the cache (flash-decoding).

    The program's query rows are the G query heads of KV head g times the SQ query positions,
    row r = head-in-group · SQ + position: row r of (b, g) is at q + b·q_b + g·q_g + r·QR (the
    host makes that true: for SQ = 1 the heads of a group are QR = q_hs apart, for G = 1 the
    positions QR = q_rs apart, otherwise it packs q to [B, HKV, G·SQ, D] first). Rows past G·SQ
    read as 0 and are never stored. Split s of n_splits reads keys [s·chunk, (s+1)·chunk) ∩
    [0, nk), chunk a multiple of BLOCK_N (so a block never crosses a split, nor a page that
    BLOCK_N divides; shorter pages are read through a paged view, paged_views).

    Writes, for split s, the rows' output at o + s·o_s + b·o_b + g·o_g + r·OR and their LSE at
    lse_out + s·l_s + b·l_b + g·l_g + r: float32 partials (a workspace that splitkv_combine
    merges), or with DIRECT (one split, and rows that are affine in o: SQ = 1 or G = 1) the final
    output in q's dtype and the final LSE. A split that sees no key writes 0 and -inf. LEFTPAD
    as kvcache_kernel's: the splits divide the keys from starts[b] on. VARLEN_Q: q packed as
    attention_varlen's, SQ = 1: a sequence of exactly one query (a decode step) has it at row
    cu_q[b] (of total_q; q_b is then q's row stride); any other (none, or a prefill chunk that
    varlen_cache_kernel's SKIP_SINGLE launch computes) reads no key and splitkv_combine stores
    nothing for it; never DIRECT. Without it cu_q is not read.
    SCORE_MOD / MASK_MOD see each row's query head as h, a tile (the rows are several query
    heads; rows past G·SQ take the group's last): the serving APIs pass FlashAttention's window,
    soft cap and ALiBi (whose slope is the row's head's).

    The cache as kvcache_kernel's: contiguous [B, S, HKV, D] (PAGE = 0, cache_rows = S) or paged
    [num_pages, PAGE, HKV, D] with table [B, max_pages]: each block's page (or, for pages that
    BLOCK_N does not divide, each row's) is looked up inside the key loop (the fast paths
    pipeline the lookups with the copies they address). Grid (query
    blocks × n_splits, B·HKV), folded by grid.fold_grid. DB as kvcache_kernel's."""
    W = D if DB == 0 else DB
    R = G * SQ
    m_blocks = tl.cdiv(R, BLOCK_M)
    x, bg = block_and_row(m_blocks * n_splits)
    split = x // m_blocks
    pid_m = x % m_blocks
    b = bg // HKV
    g = bg % HKV
    td = tl.make_desc(table, shape=(B, max_pages), strides=(max_pages, 1))
    nk, k0 = cache_keys(seqlens, b, B, cache_rows, max_pages, PAGE)
    # ceil(ceil(nk / n_splits) / BLOCK_N) · BLOCK_N from non-negative operands: written as
    # tl.cdiv (-(-a // b)), the H200's compile of the paged-view kernel (2026-12-03) started
    # every split past the first at -lo (docs/bench/2026-12-03-h200-paged-rows.md).
    if LEFTPAD:
        first = left_padding(starts, b, B, nk)
        chunk = ((nk - first + n_splits - 1) // n_splits + BLOCK_N - 1) // BLOCK_N * BLOCK_N
        lo = tl.minimum(first + split * chunk, nk)
    else:
        chunk = ((nk + n_splits - 1) // n_splits + BLOCK_N - 1) // BLOCK_N * BLOCK_N
        lo = tl.minimum(split * chunk, nk)
    hi = tl.minimum(lo + chunk, nk)
    k_end = k0 + nk                             # rows of the cache past it read as 0

    q_base = b * q_b
    q_rows = R
    if VARLEN_Q:                    # a sequence of other than one query: no rows, no keys
        q0, q_end = sequence_span(cu_q, b, B, total_q)
        q_base = q0 * q_b
        single = tl.where(q_end - q0 == 1, 1, 0)
        q_rows = R * single
        hi = lo + (hi - lo) * single
    qd = tl.make_desc(q, shape=(q_rows, D), strides=(QR, 1), offset=q_base + g * q_g)
    od = tl.make_desc(o, shape=(R, D), strides=(OR, 1), offset=split * o_s + b * o_b + g * o_g)
    ld = tl.make_desc(lse_out, shape=(R,), strides=(1,), offset=split * l_s + b * l_b + g * l_g)
    if PAGE % BLOCK_N != 0 or (LEFTPAD and PAGE != 0):
        kd, vd = paged_views(k_cache, v_cache, table, b, nk, cache_rows, max_pages, g, k_rs,
                             k_hs, v_rs, v_hs, D, PAGE)
    else:
        kd = tl.make_desc(k_cache, shape=(k_end, D), strides=(k_rs, 1), offset=g * k_hs)
        vd = tl.make_desc(v_cache, shape=(k_end, D), strides=(v_rs, 1), offset=g * v_hs)

    m0 = pid_m * BLOCK_M
    qt = tl.load(qd, (m0, 0), shape=(BLOCK_M, W))
    # Bottom-right causal, by query position (r % SQ); with SQ = 1 the host turns it off.
    q_idx = tl.broadcast_to(((m0 + tl.arange(0, BLOCK_M)) % SQ + (nk - SQ))[:, None],
                            (BLOCK_M, BLOCK_N))
    # Each row's query head, for the mods (row r is head r // SQ of the group).
    head = g * G + tl.minimum((m0 + tl.arange(0, BLOCK_M)) // SQ, G - 1)
    h_idx = tl.broadcast_to(head[:, None], (BLOCK_M, BLOCK_N))
    acc = tl.zeros((BLOCK_M, W), tl.float32)
    lse = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    for r in tl.stream(k0 + lo, k0 + hi, BLOCK_N):
        j = r - k0
        if PAGE % BLOCK_N != 0 or PAGE == 0 or LEFTPAD:
            kt = tl.load(kd, (r, 0), shape=(BLOCK_N, W))
            vt = tl.load(vd, (r, 0), shape=(BLOCK_N, W))
        else:
            kt, vt = load_paged_kv(k_cache, v_cache, td, b, j, nk, cache_rows, g, k_rs, k_hs,
                                   v_rs, v_hs, D, BLOCK_N, PAGE, W)
        s = tl.dot(qt, kt.T) * scale
        kv_idx = tl.broadcast_to((j + tl.arange(0, BLOCK_N))[None, :], (BLOCK_M, BLOCK_N))
        if SCORE_MOD is not None:
            s = SCORE_MOD(s, b, h_idx, q_idx, kv_idx)
        mask = kv_idx < nk
        if CAUSAL:
            mask = mask & (q_idx >= kv_idx)
        if MASK_MOD is not None:
            mask = mask & MASK_MOD(b, h_idx, q_idx, kv_idx)
        s = tl.where(mask, s, float("-inf"))
        p, lse = tl.softmax(s, axis=1, return_lse=True)
        acc += tl.dot(p.to(vt.dtype), vt)
    if DIRECT:
        tl.store(od, (m0, 0), acc.to(qt.dtype))
    else:
        tl.store(od, (m0, 0), acc)
    tl.store(ld, (m0,), lse)


@jit
def combine_output(cu_q, b, h, bh, i, B, SQ, H, total_q, VARLEN_Q: tl.constexpr):
    """Where splitkv_combine writes query i of sequence b, head h: (o's row, lse's element,
    rows kept): o [B, SQ, H, D] and lse [B, H, SQ]; with VARLEN_Q o packed [total_q, H, D] and
    lse [H, total_q] at row cu_q[b] (SQ = 1), kept only where sequence b has exactly one query
    (splitkv_kernel's VARLEN_Q)."""
    if VARLEN_Q:
        q0, q_end = sequence_span(cu_q, b, B, total_q)
        return q0 + i, h * total_q + q0 + i, tl.where(q_end - q0 == 1, 1, 0)
    return b * SQ + i, bh * SQ + i, 1


@jit
def splitkv_combine(o_part, lse_part, o, lse_out, B, SQ, H, HKV, n_splits, cu_q, total_q,
                    D: tl.constexpr, BLOCK_S: tl.constexpr, OUT: tl.constexpr,
                    VARLEN_Q: tl.constexpr = False):
    """Merges the n_splits partial results of splitkv_kernel, in float32, by their LSEs.

    o_part [n_splits, B, HKV, G·SQ, D] float32 and lse_part [n_splits, B, HKV, G·SQ] (G = H /
    HKV; row hg·SQ + i of (b, g) is query head g·G + hg at position i); o [B, SQ, H, D]
    (contiguous, dtype OUT) and lse_out [B, H, SQ] get

        lse = log Σ_s exp(lse_s),    o = Σ_s o_s · exp(lse_s - lse)

    computed against m = max_s lse_s. A row that no split saw (every lse_s = -inf: no key, or
    none visible under causal) gets 0 and -inf, never NaN. One program per output row (grid
    (SQ, B·H), folded by grid.fold_grid); it reads the row's partials BLOCK_S splits at a time,
    as a [BLOCK_S, D] tile whose rows are split_rows·D apart, so that hundreds of splits (a page
    per split) take a few loads rather than a loop step each. VARLEN_Q: o and lse packed as
    attention_varlen's (combine_output; cu_q not read without it)."""
    i, bh = block_and_row(SQ)
    b = bh // H
    h = bh % H
    G = H // HKV
    R = G * SQ
    row = (b * HKV + h // G) * R + (h % G) * SQ + i    # the row in each split's part
    split_rows = B * HKV * R
    ld = tl.make_desc(lse_part, shape=(n_splits,), strides=(split_rows,), offset=row)
    pd = tl.make_desc(o_part, shape=(n_splits, D), strides=(split_rows * D, 1), offset=row * D)
    m = tl.full((BLOCK_S,), float("-inf"), tl.float32)
    for s in range(0, n_splits, BLOCK_S):
        m = tl.maximum(m, tl.load(ld, (s,), shape=(BLOCK_S,), padding=float("-inf")))
    m = tl.max(m[None, :], axis=1)                      # [1]
    m = tl.where(m == float("-inf"), 0.0, m)            # no split saw the row: every weight 0
    acc = tl.zeros((BLOCK_S, D), tl.float32)
    weights = tl.zeros((BLOCK_S,), tl.float32)
    for s in range(0, n_splits, BLOCK_S):
        w = tl.exp(tl.load(ld, (s,), shape=(BLOCK_S,), padding=float("-inf")) - m)
        acc += tl.load(pd, (s, 0), shape=(BLOCK_S, D)) * w[:, None]
        weights += w
    total = tl.sum(weights[None, :], axis=1)             # [1]
    inv = tl.where(total > 0.0, 1.0 / total, 0.0)
    o_row, lse_at, kept = combine_output(cu_q, b, h, bh, i, B, SQ, H, total_q, VARLEN_Q)
    od = tl.make_desc(o, shape=(D * kept,), strides=(1,), offset=(o_row * H + h) * D)
    tl.store(od, (0,), (tl.sum(acc, axis=0) * inv).to(OUT))
    lo = tl.make_desc(lse_out, shape=(kept,), strides=(1,), offset=lse_at)
    tl.store(lo, (0,), m + tl.log(total))               # log 0 = -inf where no split saw it


@jit
def splitkv_combine_tile(o_part, lse_part, o, lse_out, B, SQ, H, HKV, n_splits, cu_q, total_q,
                         D: tl.constexpr, S: tl.constexpr, OUT: tl.constexpr,
                         VARLEN_Q: tl.constexpr = False):
    """splitkv_combine for n_splits <= S in one pass, without a loop: the row's partials are one
    [S, D] tile (rows past n_splits read as 0, their LSEs as -inf) and every quantity is a tile
    of that shape or a column of it, so that the GPU keeps it in registers
    (convert-tile-to-blocked) rather than in shared memory. The LSE is broadcast along D: each
    column computes the same max, weights and sum (D times the few exps, which a memory-bound
    merge does not notice). Same results and arguments as splitkv_combine."""
    i, bh = block_and_row(SQ)
    b = bh // H
    h = bh % H
    G = H // HKV
    R = G * SQ
    row = (b * HKV + h // G) * R + (h % G) * SQ + i
    split_rows = B * HKV * R
    ld = tl.make_desc(lse_part, shape=(n_splits,), strides=(split_rows,), offset=row)
    pd = tl.make_desc(o_part, shape=(n_splits, D), strides=(split_rows * D, 1), offset=row * D)
    lse = tl.broadcast_to(tl.load(ld, (0,), shape=(S,), padding=float("-inf"))[:, None], (S, D))
    m = tl.max(lse, axis=0)                                       # [D], every column alike
    m = tl.where(m == float("-inf"), 0.0, m)                      # no split saw the row
    w = tl.exp(lse - m[None, :])
    total = tl.sum(w, axis=0)
    acc = tl.sum(tl.load(pd, (0, 0), shape=(S, D)) * w, axis=0)
    inv = tl.where(total > 0.0, 1.0 / total, 0.0)
    o_row, lse_at, kept = combine_output(cu_q, b, h, bh, i, B, SQ, H, total_q, VARLEN_Q)
    od = tl.make_desc(o, shape=(D * kept,), strides=(1,), offset=(o_row * H + h) * D)
    tl.store(od, (0,), (acc * inv).to(OUT))
    # lse_out holds one value: column 0's (the descriptor drops the other columns).
    lo = tl.make_desc(lse_out, shape=(kept,), strides=(1,), offset=lse_at)
    tl.store(lo, (0,), m + tl.log(total))

