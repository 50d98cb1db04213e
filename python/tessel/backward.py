"""The attention backward: three DSL programs derived from the naive forward, and autograd.

How it is derived (docs/dev/backward.md has the reasoning): the forward is
`S = score_mod(Q·Kᵀ·scale)`, masked, `P = softmax(S)` over the whole key row, `O = P·V`, with
`lse = log Σ exp S` saved per row. The backward recomputes S and P from Q, K and the saved LSE
(`P = exp(S − lse)`, no N×N buffer), and with Δ = rowsum(dO∘O):

    dV = Pᵀ·dO        dP = dO·Vᵀ        dS = P∘(dP − Δ)
    dS_raw = dS∘∂score_mod/∂s     (tl.elementwise_grad: the compiler differentiates the
                                   score_mod's own element-wise tile ops, forward mode)
    dQ = dS_raw·K·scale           dK = dS_rawᵀ·Q·scale

Blocked as FlashAttention-2 does it, in three programs written in the DSL like the forward, so
that score_mod and mask_mod are traced into them the same way:

- `attention_bwd_delta`: Δ per query row, grid (⌈Nq/BLOCK_M⌉, B·H);
- `attention_bwd_dkdv`: one key block per program, grid (⌈Nk/BLOCK_N⌉, B·Hkv); its loop streams
  the query blocks of every query head of the key/value head's group (so GQA sums dK and dV over
  the group in registers, deterministically);
- `attention_bwd_dq`: one query block per program, grid (⌈Nq/BLOCK_M⌉, B·H), a key-block loop like
  the forward's (deterministic: no atomics).

Both main loops mask with `select(mask, s, −inf)` from index arithmetic, so `tile-optimize`'s
mask analysis (tile-split-masked-loops) skips the blocks a mask hides entirely — P is 0 there, so
skipping is the identity on dQ, dK and dV — and drops the mask where it shows everything.

A gradient flowing into the returned lse (return_lse=True with lse used in the loss) joins dS:
∂lse/∂S = P, so dS = P∘(dP − (Δ − dlse)); it is folded into Δ.
"""

import numpy as np

from . import cpu_tensors
from . import flex
from . import gpu
from . import language as tl
from . import torch_ops
from .grid import block_and_row, fold_grid
from .jit import jit
from .layouts import contiguous_aligned, in_place, layout_constexprs, rows_desc


@jit
def attention_bwd_delta(o, do, dlse, delta, nq, H, D: tl.constexpr, BLOCK_M: tl.constexpr,
                        O_RS: tl.constexpr = 0, O_HS: tl.constexpr = 0,
                        DO_RS: tl.constexpr = 0, DO_HS: tl.constexpr = 0,
                        DB: tl.constexpr = 0):
    """Δ = rowsum(dO∘O) − dlse, per query row (dlse: the gradient of the returned lse, or 0).
    O and dO in the layouts of layouts.py (H heads). DB: the blocks' head dim where it is not D
    (columns past D read as 0, which add nothing)."""
    W = D if DB == 0 else DB
    pid_m, bh = block_and_row(tl.cdiv(nq, BLOCK_M))  # grid.fold_grid's (query block, b·h)
    rows = bh * nq
    od = rows_desc(o, nq, D, rows, bh // H, bh % H, O_RS, O_HS)
    dod = rows_desc(do, nq, D, rows, bh // H, bh % H, DO_RS, DO_HS)
    gd = tl.make_desc(dlse, shape=(nq,), strides=(1,), offset=rows)
    dd = tl.make_desc(delta, shape=(nq,), strides=(1,), offset=rows)
    m0 = pid_m * BLOCK_M
    ot = tl.load(od, (m0, 0), shape=(BLOCK_M, W)).to(tl.float32)
    dot_ = tl.load(dod, (m0, 0), shape=(BLOCK_M, W)).to(tl.float32)
    g = tl.load(gd, (m0,), shape=(BLOCK_M,))
    tl.store(dd, (m0,), tl.sum(ot * dot_, axis=1) - g)


@jit
def attention_bwd_dkdv(q, k, v, do, lse_in, delta, dk, dv, nq, nk, H, HKV, scale,
                       D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       CAUSAL: tl.constexpr, SCORE_MOD: tl.constexpr, MASK_MOD: tl.constexpr):
    """dK and dV of one key block (FA2): the loop streams every query block of every query head
    of this key/value head's group."""
    pid_n, bkv = block_and_row(tl.cdiv(nk, BLOCK_N))  # grid.fold_grid's (key block, b·hkv)
    b = bkv // HKV
    kv_h = bkv % HKV
    group = H // HKV
    kv_rows = bkv * nk
    kd = tl.make_desc(k, shape=(nk, D), strides=(D, 1), offset=kv_rows * D)
    vd = tl.make_desc(v, shape=(nk, D), strides=(D, 1), offset=kv_rows * D)
    dkd = tl.make_desc(dk, shape=(nk, D), strides=(D, 1), offset=kv_rows * D)
    dvd = tl.make_desc(dv, shape=(nk, D), strides=(D, 1), offset=kv_rows * D)
    n0 = pid_n * BLOCK_N
    kt = tl.load(kd, (n0, 0), shape=(BLOCK_N, D))
    vt = tl.load(vd, (n0, 0), shape=(BLOCK_N, D))
    kv_idx = tl.broadcast_to((n0 + tl.arange(0, BLOCK_N))[None, :], (BLOCK_M, BLOCK_N))
    dk_acc = tl.zeros((BLOCK_N, D), tl.float32)
    dv_acc = tl.zeros((BLOCK_N, D), tl.float32)
    for g in range(0, group, 1):
        h = kv_h * group + g
        q_rows = (b * H + h) * nq
        qd = tl.make_desc(q, shape=(nq, D), strides=(D, 1), offset=q_rows * D)
        dod = tl.make_desc(do, shape=(nq, D), strides=(D, 1), offset=q_rows * D)
        ld = tl.make_desc(lse_in, shape=(nq,), strides=(1,), offset=q_rows)
        dd = tl.make_desc(delta, shape=(nq,), strides=(1,), offset=q_rows)
        for i in range(0, nq, BLOCK_M):
            qt = tl.load(qd, (i, 0), shape=(BLOCK_M, D))
            dot_ = tl.load(dod, (i, 0), shape=(BLOCK_M, D))
            lse = tl.load(ld, (i,), shape=(BLOCK_M,))
            lse = tl.where(lse == float("-inf"), 0.0, lse)   # rows that see no key: P = 0
            dlt = tl.load(dd, (i,), shape=(BLOCK_M,))
            q_idx = tl.broadcast_to((i + tl.arange(0, BLOCK_M))[:, None], (BLOCK_M, BLOCK_N))
            s_raw = tl.dot(qt, kt.T) * scale
            s_mod = s_raw
            if SCORE_MOD is not None:
                s_mod = SCORE_MOD(s_raw, b, h, q_idx, kv_idx)
            mask = (kv_idx < nk) & (q_idx < nq)
            if CAUSAL:
                mask = mask & (q_idx >= kv_idx)
            if MASK_MOD is not None:
                mask = mask & MASK_MOD(b, h, q_idx, kv_idx)
            s = tl.where(mask, s_mod, float("-inf"))
            p = tl.exp(s - lse[:, None])
            dv_acc += tl.dot(p.to(dot_.dtype).T, dot_)
            dp = tl.dot(dot_, vt.T)
            ds = p * (dp - dlt[:, None])
            if SCORE_MOD is not None:
                ds = ds * tl.elementwise_grad(s_mod, s_raw)
            dk_acc += tl.dot(ds.to(qt.dtype).T, qt)
    tl.store(dkd, (n0, 0), (dk_acc * scale).to(kt.dtype))
    tl.store(dvd, (n0, 0), dv_acc.to(vt.dtype))


@jit
def log2_scores(dot, scale, b, h, q_idx, kv_idx, SCORE_MOD: tl.constexpr):
    """The fast programs' scores in log2 units, S·log2(e), so that P = exp2(S·log2(e) −
    lse·log2(e)) is one FFMA and one ex2 an element where there is no score_mod (the scale folded
    into the dot's factor); and the score_mod's input and output, for its derivative."""
    s_raw = dot
    s_mod = dot
    if SCORE_MOD is None:
        s2 = dot * (scale * 1.4426950408889634)
    else:
        s_raw = dot * scale
        s_mod = SCORE_MOD(s_raw, b, h, q_idx, kv_idx)
        s2 = s_mod * 1.4426950408889634
    return s2, s_mod, s_raw


@jit
def masked(s, b, h, q_idx, kv_idx, visible, CAUSAL: tl.constexpr, MASK_MOD: tl.constexpr):
    """s where the mask shows the key (`visible`, the bounds, and causal and mask_mod), −inf
    elsewhere."""
    mask = visible
    if CAUSAL:
        mask = mask & (q_idx >= kv_idx)
    if MASK_MOD is not None:
        mask = mask & MASK_MOD(b, h, q_idx, kv_idx)
    return tl.where(mask, s, float("-inf"))


@jit
def keyrows_key_block(kd, vd, n0, D: tl.constexpr, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, PART: tl.constexpr = 0, WV: tl.constexpr = 0):
    """What a key-rows dK/dV program holds for its key block: K, V, the key index tile (keys as
    rows) and the zero dK and dV accumulators. PART 1 (dV alone) does not read V (K stands in
    for it, unread); the accumulator a part does not use is dead code, removed. WV: V's and
    dV's width where it is not D (v of its own head dim, DV)."""
    WVV = D if WV == 0 else WV
    kt = tl.load(kd, (n0, 0), shape=(BLOCK_N, D))
    vt = kt
    if PART != 1:
        vt = tl.load(vd, (n0, 0), shape=(BLOCK_N, WVV))
    kv_idx = tl.broadcast_to((n0 + tl.arange(0, BLOCK_N))[:, None], (BLOCK_N, BLOCK_M))
    return kt, vt, kv_idx, tl.zeros((BLOCK_N, D), tl.float32), \
        tl.zeros((BLOCK_N, WVV), tl.float32)


@jit
def attention_bwd_dkdv_keyrows(q, k, v, do, lse_in, delta, dk, dv, dq, nq, nk, H, HKV,
                               OUT_HEADS, scale, D: tl.constexpr, BLOCK_M: tl.constexpr,
                               BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
                               SCORE_MOD: tl.constexpr, MASK_MOD: tl.constexpr,
                               Q_RS: tl.constexpr = 0, Q_HS: tl.constexpr = 0,
                               K_RS: tl.constexpr = 0, K_HS: tl.constexpr = 0,
                               V_RS: tl.constexpr = 0, V_HS: tl.constexpr = 0,
                               DO_RS: tl.constexpr = 0, DO_HS: tl.constexpr = 0,
                               PART: tl.constexpr = 0, FUSED_DQ: tl.constexpr = 0,
                               EVEN: tl.constexpr = False, DB: tl.constexpr = 0,
                               DV: tl.constexpr = 0):
    """dK and dV of one key block for one query head, with the keys as the rows of every tile
    (FlashAttention-2's GPU form): Sᵀ = K·Qᵀ, so Pᵀ and dSᵀ are accumulator tiles whose rows
    are keys and feed dV += Pᵀ·dO and dK += dSᵀ·Q as A operands from registers, and the LSE and
    Δ of the streamed query block are column vectors. Grid (⌈Nk/BLOCK_N⌉, B·H): one loop level,
    the fast paths' class. dk and dv have OUT_HEADS heads: HKV (each program writes its key/value
    head's block: no GQA) or H (GQA: one block per query head, summed over each group after).
    PART: 0 both; 1 dV alone (V not read, no dP); 2 dK alone (no dV accumulator) — two programs
    where the two 64×D float32 accumulators do not fit in registers beside each other
    (SPLIT_KEYROWS). FUSED_DQ: dQ too, added into the float32 dq [B, H, Nq, D] (zeroed by the
    caller) by atomics as dQᵀ = Kᵀ·dSᵀ·scale — dSᵀ as it is, K read transposed — instead of
    the dQ program's second pass over S and dP (FUSED_DQ_DIMS); dq is unread otherwise.

    Bounds: not causal, without mods and FUSED_DQ, no bounds mask is needed. A query past nq
    reads zeros (Q, dO, its LSE and Δ: out of range reads 0), so its column of Pᵀ·dO and dSᵀ·Q
    adds exact zeros; a key past nk fills only its own row of dK and dV, which the store
    drops. A mod keeps the mask (its value at those zeros may overflow, and inf·0 is NaN), as
    does FUSED_DQ (dQ sums over the keys); causal programs keep it too (their diagonal's
    masked loop stays either way, and without the bounds ptxas spilled more at d128: 6–8 %
    slower on the H100). EVEN: nq and nk are multiples of BLOCK_M and BLOCK_N, no block
    crosses them, and the mask goes there too (even_blocks).

    DB: the blocks' head dim where it is not D (0: D; not with FUSED_DQ): q, k, v and dO read
    DB columns wide, those past D as 0, so dK and dV get zero columns there, which the stores
    of D columns drop — a head dim the fast paths do not take, padded inside the program
    (BLOCK_HEAD_DIM_CHIPS). The scale is the caller's (1/sqrt(D)).

    DV: v's, dO's and dv's head dim where it is not D (0: D; not with DB or FUSED_DQ): dP and
    dV at that width (DeepSeek's MLA: 192 and 128)."""
    W = D if DB == 0 else DB
    DVV = D if DV == 0 else DV
    pid_n, bh = block_and_row(tl.cdiv(nk, BLOCK_N))  # grid.fold_grid's (key block, b·h)
    b = bh // H
    h = bh % H
    kv_h = h // (H // HKV)
    kv_rows = (b * HKV + kv_h) * nk
    out_rows = (b * OUT_HEADS + h * OUT_HEADS // H) * nk
    q_rows = bh * nq
    kd = rows_desc(k, nk, D, kv_rows, b, kv_h, K_RS, K_HS)
    vd = rows_desc(v, nk, DVV, kv_rows, b, kv_h, V_RS, V_HS)
    dkd = tl.make_desc(dk, shape=(nk, D), strides=(D, 1), offset=out_rows * D)
    dvd = tl.make_desc(dv, shape=(nk, DVV), strides=(DVV, 1), offset=out_rows * DVV)
    qd = rows_desc(q, nq, D, q_rows, b, h, Q_RS, Q_HS)
    dod = rows_desc(do, nq, DVV, q_rows, b, h, DO_RS, DO_HS)
    ld = tl.make_desc(lse_in, shape=(nq,), strides=(1,), offset=q_rows)
    dd = tl.make_desc(delta, shape=(nq,), strides=(1,), offset=q_rows)
    # dQᵀ's view of dq: [D, Nq], a query's D values one apart. The fast paths' accumulators
    # have BLOCK_N rows: past that, dQᵀ in two halves of D/2 rows, each from K's half columns —
    # on sm_90a slabs of K's own block in shared memory, not copies (MmaClass.h, viewOf).
    DH = D // 2 if D > BLOCK_N else D
    dqtd = tl.make_desc(dq, shape=(DH, nq), strides=(1, D), offset=q_rows * D)
    dqtd2 = tl.make_desc(dq, shape=(DH, nq), strides=(1, D), offset=q_rows * D + DH)
    BOUNDS_FREE = not CAUSAL and SCORE_MOD is None and MASK_MOD is None and not FUSED_DQ
    n0 = pid_n * BLOCK_N
    kt, vt, kv_idx, dk_acc, dv_acc = keyrows_key_block(kd, vd, n0, W, BLOCK_M, BLOCK_N, PART,
                                                       DV)
    k1 = kt
    k2 = kt
    if FUSED_DQ and D > BLOCK_N:
        k1 = tl.load(kd, (n0, 0), shape=(BLOCK_N, DH))
        k2 = tl.load(kd, (n0, DH), shape=(BLOCK_N, DH))
    keyrows_query_loop(qd, dod, ld, dd, dkd, dvd, dqtd, dqtd2, kt, vt, k1, k2, kv_idx, dk_acc,
                       dv_acc, n0, nq, nq, nk, 0, b, h, scale, D, W, BLOCK_M, BLOCK_N, CAUSAL,
                       SCORE_MOD, MASK_MOD, PART, FUSED_DQ, EVEN or BOUNDS_FREE, DV)


@jit
def keyrows_query_loop(qd, dod, ld, dd, dkd, dvd, dqtd, dqtd2, kt, vt, k1, k2, kv_idx, dk_acc,
                       dv_acc, n0, q_stop, q_end, nk, shift, b, h, scale, D: tl.constexpr,
                       W: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       CAUSAL: tl.constexpr, SCORE_MOD: tl.constexpr, MASK_MOD: tl.constexpr,
                       PART: tl.constexpr, FUSED_DQ: tl.constexpr, NO_BOUNDS: tl.constexpr,
                       WV: tl.constexpr = 0):
    """The key-rows program's loop over the query blocks [0, q_stop) of its key block n0 (K, V
    and the accumulators from keyrows_key_block), then its stores of dK and dV. A query's
    index is its row plus `shift` (a packed sequence's bottom-right alignment: 0 for
    attention_backward), the rows inside the bounds those below q_end and the keys below nk
    (NO_BOUNDS: no bounds mask, attention_bwd_dkdv_keyrows' docstring says where). WV: dO's
    width where it is not W (keyrows_key_block's)."""
    for i in range(0, q_stop, BLOCK_M):
        qt = tl.load(qd, (i, 0), shape=(BLOCK_M, W))
        dot_ = tl.load(dod, (i, 0), shape=(BLOCK_M, W if WV == 0 else WV))
        q_idx = tl.broadcast_to((i + shift + tl.arange(0, BLOCK_M))[None, :], (BLOCK_N, BLOCK_M))
        st = tl.dot(kt, qt.T)
        if W == 128 and PART != 1 and not FUSED_DQ:
            dp = tl.dot(vt, dot_.T)             # beside Sᵀ (docs/dev/backward.md, "Dot order")
        s2, s_mod, s_raw = log2_scores(st, scale, b, h, q_idx, kv_idx, SCORE_MOD)
        # The LSE and Δ are read where they are used: as column vectors they take 16 registers
        # each a thread, which should not be live across the dots.
        lse = tl.load(ld, (i,), shape=(BLOCK_M,))
        lse2 = tl.where(lse == float("-inf"), 0.0, lse) * 1.4426950408889634   # no key: P = 0
        inside = tl.full((BLOCK_N, BLOCK_M), True, tl.int1) if NO_BOUNDS else \
            (kv_idx < nk) & (q_idx < q_end)
        s = masked(s2, b, h, q_idx, kv_idx, inside, CAUSAL, MASK_MOD)
        p = tl.exp2(s - lse2[None, :])
        if PART != 2:
            dv_acc += tl.dot(p.to(dot_.dtype), dot_)
        if PART != 1:
            if W != 128 or FUSED_DQ:
                dp = tl.dot(vt, dot_.T)
            dlt = tl.load(dd, (i,), shape=(BLOCK_M,))
            ds = p * (dp - dlt[None, :])
            if SCORE_MOD is not None:
                ds = ds * tl.elementwise_grad(s_mod, s_raw)
            ds16 = ds.to(qt.dtype)
            dk_acc += tl.dot(ds16, qt)
            if FUSED_DQ:
                tl.atomic_add(dqtd, (0, i), tl.dot(k1.T, ds16) * scale)
                if D > BLOCK_N:
                    tl.atomic_add(dqtd2, (0, i), tl.dot(k2.T, ds16) * scale)
    if PART != 1:
        tl.store(dkd, (n0, 0), (dk_acc * scale).to(kt.dtype))
    if PART != 2:
        tl.store(dvd, (n0, 0), dv_acc.to(kt.dtype))


@jit
def dq_query_block(qd, dod, ld, dd, m0, D: tl.constexpr, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr, WV: tl.constexpr = 0):
    """What a dQ program holds for its query block: Q, dO (WV wide where not D), the LSE in log2
    units (0 where the row sees no key, so that P = 0 there), Δ, and the query index tile."""
    qt = tl.load(qd, (m0, 0), shape=(BLOCK_M, D))
    dot_ = tl.load(dod, (m0, 0), shape=(BLOCK_M, D if WV == 0 else WV))
    lse = tl.load(ld, (m0,), shape=(BLOCK_M,))
    lse2 = tl.where(lse == float("-inf"), 0.0, lse) * 1.4426950408889634
    dlt = tl.load(dd, (m0,), shape=(BLOCK_M,))
    q_idx = tl.broadcast_to((m0 + tl.arange(0, BLOCK_M))[:, None], (BLOCK_M, BLOCK_N))
    return qt, dot_, lse2, dlt, q_idx


@jit
def attention_bwd_dq(q, k, v, do, lse_in, delta, dq, nq, nk, H, HKV, scale,
                     D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     CAUSAL: tl.constexpr, SCORE_MOD: tl.constexpr, MASK_MOD: tl.constexpr,
                     Q_RS: tl.constexpr = 0, Q_HS: tl.constexpr = 0,
                     K_RS: tl.constexpr = 0, K_HS: tl.constexpr = 0,
                     V_RS: tl.constexpr = 0, V_HS: tl.constexpr = 0,
                     DO_RS: tl.constexpr = 0, DO_HS: tl.constexpr = 0,
                     EVEN: tl.constexpr = False, DB: tl.constexpr = 0, DV: tl.constexpr = 0):
    """dQ of one query block: a key-block loop like the forward's; q, k, v and dO in the
    layouts of layouts.py. EVEN: nk is a multiple of BLOCK_N, no key-tail mask (even_blocks).
    DB, DV: the blocks' head dim and v's, as the key-rows program's."""
    W = D if DB == 0 else DB
    DVV = D if DV == 0 else DV
    pid_m, bh = block_and_row(tl.cdiv(nq, BLOCK_M))  # grid.fold_grid's (query block, b·h)
    if CAUSAL:
        pid_m = tl.cdiv(nq, BLOCK_M) - 1 - pid_m      # the longest rows first, as the forward
    b = bh // H
    h = bh % H
    kv_h = h // (H // HKV)
    q_rows = bh * nq
    kv_rows = (b * HKV + kv_h) * nk
    qd = rows_desc(q, nq, D, q_rows, b, h, Q_RS, Q_HS)
    kd = rows_desc(k, nk, D, kv_rows, b, kv_h, K_RS, K_HS)
    vd = rows_desc(v, nk, DVV, kv_rows, b, kv_h, V_RS, V_HS)
    dod = rows_desc(do, nq, DVV, q_rows, b, h, DO_RS, DO_HS)
    dqd = tl.make_desc(dq, shape=(nq, D), strides=(D, 1), offset=q_rows * D)
    ld = tl.make_desc(lse_in, shape=(nq,), strides=(1,), offset=q_rows)
    dd = tl.make_desc(delta, shape=(nq,), strides=(1,), offset=q_rows)
    m0 = pid_m * BLOCK_M
    qt, dot_, lse2, dlt, q_idx = dq_query_block(qd, dod, ld, dd, m0, W, BLOCK_M, BLOCK_N, DV)
    dq_key_loop(qt, dot_, lse2, dlt, q_idx, kd, vd, dqd, m0, nk, nk, b, h, scale, W, BLOCK_M,
                BLOCK_N, CAUSAL, SCORE_MOD, MASK_MOD, EVEN, DV)


@jit
def dq_key_loop(qt, dot_, lse2, dlt, q_idx, kd, vd, dqd, m0, k_stop, nk, b, h, scale,
                W: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                CAUSAL: tl.constexpr, SCORE_MOD: tl.constexpr, MASK_MOD: tl.constexpr,
                EVEN: tl.constexpr, WV: tl.constexpr = 0):
    """The dQ program's loop over the key blocks [0, k_stop) for its query block m0 (what
    dq_query_block read; q_idx the queries' indices as the masks see them), keys below nk
    inside the bounds, then its store of dQ. WV: V's width where it is not W."""
    dq_acc = tl.zeros((BLOCK_M, W), tl.float32)
    for j in range(0, k_stop, BLOCK_N):
        kt = tl.load(kd, (j, 0), shape=(BLOCK_N, W))
        vt = tl.load(vd, (j, 0), shape=(BLOCK_N, W if WV == 0 else WV))
        kv_idx = tl.broadcast_to((j + tl.arange(0, BLOCK_N))[None, :], (BLOCK_M, BLOCK_N))
        s2, s_mod, s_raw = log2_scores(tl.dot(qt, kt.T), scale, b, h, q_idx, kv_idx, SCORE_MOD)
        inside = tl.full((BLOCK_M, BLOCK_N), True, tl.int1) if EVEN else kv_idx < nk
        s = masked(s2, b, h, q_idx, kv_idx, inside, CAUSAL, MASK_MOD)
        p = tl.exp2(s - lse2[:, None])
        dp = tl.dot(dot_, vt.T)
        ds = p * (dp - dlt[:, None])
        if SCORE_MOD is not None:
            ds = ds * tl.elementwise_grad(s_mod, s_raw)
        dq_acc += tl.dot(ds.to(kt.dtype), kt)
    tl.store(dqd, (m0, 0), (dq_acc * scale).to(qt.dtype))


def _config(q, k, v, causal, scale, score_mod, mask_mod, enable_gqa, block_m, block_n,
            value_dim=False):
    """((B, H, Nq, D, Hkv, Nk), scale, the programs' constexprs); `value_dim`: v may have a
    head dim of its own, the key-rows and dQ programs' DV."""
    from .attention import _as_jit, _block, _check_shapes, softmax_scale
    B, H, Nq, D, Hkv, Nk = _check_shapes(q.shape, k.shape, v.shape, enable_gqa, value_dim)
    scale = softmax_scale(scale, D)
    BM = block_m or _block(Nq)
    BN = block_n or _block(Nk)
    constexprs = dict(D=D, BLOCK_M=BM, BLOCK_N=BN, CAUSAL=bool(causal),
                      SCORE_MOD=_as_jit(score_mod, "score_mod"),
                      MASK_MOD=_as_jit(mask_mod, "mask_mod"),
                      **({"DV": int(v.shape[3])} if v.shape[3] != D else {}))
    return (B, H, Nq, D, Hkv, Nk), scale, constexprs


def delta_block(D):
    """Query rows of one Δ program: 4096 elements of O a program (64 rows at d64, 32 at d128, 16
    at d256) — a memory-bound program of 32–56 registers on the blocked lowering, many
    programs to spread the reads over the SMs."""
    return max(16, min(64, 4096 // max(D, 1)))


# gpu.scratch_f32's pool of zeros: the dlse the Δ program reads when the LSE has no gradient,
# instead of a zeros allocation and fill per call. Never written.
_zero_buffers = {}


def zeros_scratch(like, n):
    """At least n float32 zeros on like's device (a shared buffer: read it, never write it)."""
    return gpu.scratch_f32(_zero_buffers, like, n, zeros=True)


def _launch(program, grid, *args, **constexprs):
    """How _run and delta_cuda launch a program (_compile_programs passes one that traces)."""
    program[grid](*args, **constexprs)


def delta_cuda(o, do, dlse, launch=_launch, block_dim=0):
    """Δ = rowsum(dO∘O) − dlse of CUDA tensors o, do [B, H, Nq, D] (in layouts.row_layout's
    layouts) and float32 dlse [B, H, Nq], by attention_bwd_delta: O and dO read once, where torch's
    `(o.float() * do.float()).sum(-1) - dlse` wrote and read two float32 copies (0.37 ms at
    b1 h16 n16k d128 on the H200, docs/bench/2026-12-03-h200-occupancy.md). `block_dim`: the
    blocks' head dim where it is not D (the program's DB)."""
    torch = gpu.torch_module()
    B, H, Nq, D = o.shape
    delta = torch.empty((B, H, Nq), dtype=torch.float32, device=o.device)
    if B * H and Nq:
        bm = delta_block(block_dim or D)
        launch(attention_bwd_delta, fold_grid(-(-Nq // bm), B * H),
               o, do, dlse, delta, Nq, H, D=D, BLOCK_M=bm, **layout_constexprs(O=o, DO=do),
               **({"DB": block_dim} if block_dim else {}))
    return delta


# Whether the key-rows and dQ programs take their EVEN form where the lengths allow (False:
# always the bounds-masked form, a switch for comparisons; set it before the first call).
EVEN_BLOCKS = True

# Whether causal calls without a mask_mod take the key-rows program's EVEN form too where the
# lengths are whole blocks: the diagonal's masked loop stays, the bounds' masked loop after the
# unmasked one goes (ptxas, sm_90a 64×64: d128 340 → 104 bytes of spill at 255 registers,
# 5,413 → 3,995 PTX lines; d64 4,098 → 2,920 lines at 166). Off: measured on an H100, d64
# ±2 %, d128 4k causal −5 % (docs/bench/2026-12-05-h100-s35.md); on, a ring's causal steps of
# whole and ragged lengths trace the program twice.
EVEN_CAUSAL = False


def even_blocks(shapes, cx, dq_cx):
    """The EVEN constexpr of the key-rows program ({} or {"EVEN": True}: Nq and Nk multiples
    of its blocks) and of the dQ program (Nk a multiple of its BLOCK_N): whole blocks only, so
    the bounds mask is all true and goes, as the forward's EVEN_N — one loop where
    tile-split-masked-loops made an unmasked and a masked copy. The results are the masked
    form's, bit for bit. As the forward's, only where the bounds are the only mask (not
    causal, no mask_mod): elsewhere the masked loops stay, and a second specialisation would
    cost a compile for little (a ring's steps of whole and ragged lengths would trace twice).
    The non-causal key-rows program without mods needs no bounds mask at any length (its
    docstring says why), so EVEN is its own only with a score_mod. Causal, with EVEN_CAUSAL,
    the key-rows program's (the dQ program's barely changes there)."""
    _, _, Nq, _, _, Nk = shapes
    if not EVEN_BLOCKS or cx["MASK_MOD"] is not None:
        return {}, {}
    whole = Nq % cx["BLOCK_M"] == 0 and Nk % cx["BLOCK_N"] == 0
    if cx["CAUSAL"]:
        return ({"EVEN": True} if EVEN_CAUSAL and whole else {}), {}
    kr = whole and cx["SCORE_MOD"] is not None
    return ({"EVEN": True} if kr else {}), ({"EVEN": True} if Nk % dq_cx["BLOCK_N"] == 0 else {})


def keyrows_part_blocks(cx, D, part):
    """The key-rows program's constexprs for PART `part` at head dim D: `cx`, with the dK
    program's own query blocks where KEYROWS_DK_BLOCK_M has D."""
    if part == 2 and D in KEYROWS_DK_BLOCK_M:
        return _with_blocks(cx, (KEYROWS_DK_BLOCK_M[D], cx["BLOCK_N"]))
    return cx


def keyrows_launches(shapes, cx, dq_cx):
    """[(PART, constexprs)] of the key-rows programs a backward of `shapes` launches: one
    (PART 0), or dV then dK at head dims in SPLIT_KEYROWS (the blocks' head dim: DB where
    given), each with its blocks and EVEN."""
    D = cx.get("DB") or shapes[3]
    launches = []
    for part in ((1, 2) if D in SPLIT_KEYROWS else (0,)):
        part_cx = keyrows_part_blocks(cx, D, part)
        launches.append((part, dict(part_cx, **even_blocks(shapes, part_cx, dq_cx)[0])))
    return launches


def _run(q, k, v, o, lse, do, dlse, delta, dq, dk, dv, shapes, scale, cx, keyrows=False,
         delta_ready=False, dq_cx=None, side=None, dq32=None, launch=_launch, chip=None):
    """The three programs. With `keyrows`, dK and dV come from attention_bwd_dkdv_keyrows (the
    fast paths' form); under GQA its dk and dv then have one head per query head (H), which the
    caller sums over each group. With `delta_ready`, `delta` holds Δ already. `dq_cx`: the dQ
    program's constexprs where its blocks differ from the others' (default `cx`). `side`: a
    torch CUDA stream on which the dQ program runs beside the dK/dV program (CONCURRENT_DQ).
    `dq32`: a zeroed float32 buffer of q's shape into which the key-rows program adds dQ
    (FUSED_DQ_DIMS; keyrows only): no dQ program, `dq` unused. `launch(program, grid, *args,
    **constexprs)` launches each program (_compile_programs traces them instead). `chip`: the
    GPU's (NO_SPILL_SEARCH's key-rows variants), None on the interpreter."""
    B, H, Nq, D, Hkv, Nk = shapes
    BM, BN = cx["BLOCK_M"], cx["BLOCK_N"]
    W = cx.get("DB") or D                     # the blocks' head dim (the programs' tables')
    dq_cx = dq_cx or cx
    dq_even = even_blocks(shapes, cx, dq_cx)[1]
    if B * H and Nq and not delta_ready:
        launch(attention_bwd_delta, fold_grid(-(-Nq // BM), B * H), o, do, dlse, delta, Nq, H,
               D=o.shape[3], BLOCK_M=BM, **({"DB": cx["DB"]} if "DB" in cx else {}))

    def dq_program():
        if B * H and Nq and dq32 is None:
            launch(attention_bwd_dq, fold_grid(-(-Nq // dq_cx["BLOCK_M"]), B * H),
                   q, k, v, do, lse, delta, dq, Nq, Nk, H, Hkv, scale, **dq_cx, **dq_even)
    if side is not None:
        # The side stream starts after Δ and the inputs; the caller's stream goes on after
        # both programs. Every tensor is the caller stream's, which waits for the side stream
        # before anything later can reuse their memory.
        torch = gpu.torch_module()
        main = torch.cuda.current_stream(dq.device)
        side.wait_stream(main)
        with torch.cuda.stream(side):
            dq_program()
    if keyrows and B * H and Nk:
        for part, kr_cx in keyrows_launches(shapes, cx, dq_cx):
            launch(_keyrows_program(chip, W, part, kr_cx, dq32 is not None),
                   fold_grid(-(-Nk // BN), B * H),
                   q, k, v, do, lse, delta, dk, dv, dq if dq32 is None else dq32, Nq, Nk, H, Hkv,
                   dk.shape[1], scale, **kr_cx, **({"PART": part} if part else {}),
                   **({} if dq32 is None else {"FUSED_DQ": 1}))
    elif B * Hkv and Nk:
        launch(attention_bwd_dkdv, fold_grid(-(-Nk // BN), B * Hkv), q, k, v, do, lse, delta, dk,
               dv, Nq, Nk, H, Hkv, scale, **cx)
    if side is None:
        dq_program()
    else:
        main.wait_stream(side)


# (chip, head dim, BLOCK_M, BLOCK_N, PART, CAUSAL) whose key-rows program without mods spills
# with the scale fold -> the CompileOptions switches the spill fallbacks' search ends with
# besides the generic scale (ptxas, CUDA 13.0; sm_90a d128 non-causal then spills nothing,
# causal 340 bytes, d256's dK part 104–1164, d192's causal 20, sm_80 d128 1000–1484).
# Compiled so at once — generic (do_not_specialize) and unsearched (spill_fallbacks off) —
# they are the search's PTX and cubin, the first call one to two compiles shorter
# (docs/dev/cold-compile.md).
# test_spills.py checks each entry.
NO_SPILL_SEARCH = {("sm_90a", 128, 64, 64, 0, False): {},
                   ("sm_90a", 128, 64, 64, 0, True): {},
                   ("sm_90a", 192, 64, 64, 2, True): {},
                   ("sm_90a", 256, 64, 64, 2, False): {"vector_stores": False},
                   ("sm_90a", 256, 64, 64, 2, True): {"vector_stores": False},
                   ("sm_80", 128, 64, 64, 0, False): {},
                   ("sm_80", 128, 64, 64, 0, True): {}}


# (chip, head dim) -> bytes of spill the key-rows program's occupancy hint may add
# (GpuOptions.occupancy_spill_bytes). Measured on the d64 causal form when it took 255
# registers: at three CTAs an SM (168) with 56 bytes of spill it ran 25 % faster than at two
# (H100, docs/bench/2026-12-05-h100-s33.md). Since the LSE and Δ loads branch per register
# it fits 166 unasked; the non-causal form takes 176 and keeps 168 with 64 bytes so.
KEYROWS_OCCUPANCY_SPILL = {("sm_90a", 64): 64}


def _keyrows_program(chip, D, part, cx, fused_dq):
    """attention_bwd_dkdv_keyrows for `chip`, with KEYROWS_OCCUPANCY_SPILL's allowance and as
    its generic unsearched variant where NO_SPILL_SEARCH says where the search would end (as
    measured: no score_mod, mask_mod or FUSED_DQ), each where its table has the program."""
    options = {}
    spill = KEYROWS_OCCUPANCY_SPILL.get((chip, D))
    if spill:
        options["occupancy_spill_bytes"] = spill
    if cx["SCORE_MOD"] is None and cx["MASK_MOD"] is None and not fused_dq:
        given_up = NO_SPILL_SEARCH.get((chip, D, cx["BLOCK_M"], cx["BLOCK_N"], part,
                                        bool(cx["CAUSAL"])))
        if given_up is not None:
            options.update(do_not_specialize=("scale",), spill_fallbacks=False, **given_up)
    return attention_bwd_dkdv_keyrows.with_options(**options) if options else \
        attention_bwd_dkdv_keyrows


# device -> the torch stream the dQ program runs on beside the dK/dV program (CONCURRENT_DQ).
_side_streams = {}


def _side_stream(device):
    torch = gpu.torch_module()
    s = _side_streams.get(device)
    if s is None:
        s = _side_streams[device] = torch.cuda.Stream(device)
    return s


def attention_backward(q, k, v, o, lse, do, causal=False, scale=None, score_mod=None,
                       mask_mod=None, enable_gqa=False, dlse=None, block_m=None, block_n=None,
                       block_mask=None, deterministic=False, window_size=None, softcap=None,
                       alibi_slopes=None):
    """The gradients of :func:`attention` with respect to q, k and v.

    Same arguments and semantics as :func:`attention` for q, k, v and the options. numpy
    arrays and torch CPU tensors run on the CPU interpreter (float32, float16, or bf16 — as
    uint16 bits in numpy; the gradients have the inputs' dtype, lse and dlse are float32);
    CUDA torch tensors on the GPU.

    Args:
        q: queries, ``[B, H, Nq, D]``.
        k: keys, ``[B, Hkv, Nk, D]``.
        v: values, like k, or of a head dim of its own at most D (``[B, Hkv, Nk, Dv]``).
        o: the output of the forward (v's head dim).
        lse: its log-sum-exp, float32 ``[B, H, Nq]`` (``return_lse=True``).
        do: the gradient of the loss with respect to o.
        causal: as in :func:`attention`.
        scale: as in :func:`attention`.
        score_mod: as in :func:`attention`; it must be differentiable
            (:func:`tessel.language.elementwise_grad`).
        mask_mod: as in :func:`attention`.
        enable_gqa: as in :func:`attention`.
        dlse: the gradient with respect to lse, if the loss used it (broadcast to lse's shape).
        block_m: the query block size of the backward programs.
        block_n: the key block size.
        block_mask: the :class:`tessel.BlockMask` of the forward (with its mask_mod; causal
            False), or FlexAttention's BlockMask as tessel.attention takes it: on the
            interpreter the programs visit only its blocks
            (python/tessel/blocksparse_backward.py), on CUDA too where the fast paths take
            the programs (``backward.SPARSE_BACKWARD_ON_GPU``; docs/dev/backward.md).
        deterministic: as in :func:`attention`: dq by its own program, never by atomics.
        window_size: as in :func:`attention` (FlashAttention's sliding window).
        softcap: as in :func:`attention`.
        alibi_slopes: as in :func:`attention`.

    Returns:
        ``(dq, dk, dv)``: dq like q, dk and dv like k (GQA: summed over each group's heads).

    Raises:
        TypeError: inputs of mixed kinds or dtypes.
        ValueError: shapes that do not fit together, a v wider than q, or a block_mask that
            does not fit.
    """
    if block_mask is not None and flex.is_flex_block_mask(block_mask):
        mask_mod, block_mask = flex.taken_over(block_mask, mask_mod, torch_ops.compiling(q))
    if torch_ops.compiling(q):          # under torch.compile: one node of the graph
        return torch_ops.attention_backward(
            q, k, v, o, lse, do, causal, scale, score_mod, mask_mod, enable_gqa, dlse, block_m,
            block_n, block_mask, deterministic, window_size, softcap, alibi_slopes)
    from .attention import _flash_arguments, _past_i32, _span, check_block_sizes, softmax_scale
    block_m, block_n = check_block_sizes(block_m, block_n, "tessel.attention_backward")
    if cpu_tensors.is_cpu_tensor(q):
        return cpu_tensors.call(
            attention_backward, q, k, v, o, lse, do, causal=causal, scale=scale,
            score_mod=score_mod, mask_mod=mask_mod, enable_gqa=enable_gqa, dlse=dlse,
            block_m=block_m, block_n=block_n, block_mask=block_mask, deterministic=deterministic,
            window_size=window_size, softcap=softcap, alibi_slopes=alibi_slopes)
    if window_size is not None or softcap is not None or alibi_slopes is not None:
        score_mod, mask_mod = _flash_arguments(q, causal, window_size, softcap, alibi_slopes,
                                               score_mod, mask_mod, block_mask)
    if _past_i32(q, k, v) or _past_i32(o, do, do):
        raise ValueError(
            f"tessel.attention_backward: the tensors span {max(_span(x) for x in (q, k, v, o))} "
            "elements, past the 2^31 the kernels' 32-bit offsets reach: call it per chunk of "
            "batches (tessel.attention's autograd does so by itself)")
    if block_mask is not None and v.shape[-1] != q.shape[-1]:
        return _value_dim_padded(attention_backward, q, k, v, o, lse, do, causal, scale,
                                 score_mod, mask_mod, enable_gqa, dlse, block_m, block_n,
                                 block_mask, deterministic)
    if block_mask is not None:
        from . import blocksparse, blocksparse_backward
        B, H, Nq, D = q.shape
        on_gpu = gpu.is_torch_tensor(q)
        blocksparse.check_block_mask(block_mask, mask_mod, B, H, Nq, k.shape[2], on_gpu,
                                     causal, block_m, block_n)
        # At a head dim the fast paths pad, the programs' DB where they take it.
        block_dim = sparse_block_dim(q, k, v, o, do) if on_gpu else 0
        if blocksparse.runs_as_causal(block_mask, block_m, block_n):
            # The forward ran the dense causal kernel (tessel.attention): so does the backward.
            causal, mask_mod = True, None
        elif not on_gpu or (SPARSE_BACKWARD_ON_GPU and _fast_backward_config(
                q, k, v, False, scale, score_mod, mask_mod, enable_gqa,
                block_dim=block_dim) is not None):
            fast = FAST_BACKWARD_BLOCKS.get(block_dim or D, (64, 64)) if on_gpu else \
                (block_mask.BLOCK_M, block_mask.BLOCK_N)
            return blocksparse_backward.backward(
                q, k, v, o, lse, do, block_mask,
                softmax_scale(scale, D), score_mod, mask_mod,
                block_m or min(fast[0], block_mask.BLOCK_M),
                block_n or min(fast[1], block_mask.BLOCK_N), dlse, block_dim)
    if gpu.is_torch_tensor(q):
        if AUTO_BLOCK_MASK and mask_mod is not None and block_mask is None and \
                block_m is None and block_n is None:
            # A mask read from tensors: the block mask the forward made for it
            # (blocksparse.auto_block_mask, kept per tensors), as the autograd backward does.
            from . import blocksparse
            auto = blocksparse.auto_block_mask(q, k, causal, mask_mod, enable_gqa)
            if auto is not None:
                return attention_backward(q, k, v, o, lse, do, False, scale, score_mod, auto[1],
                                          enable_gqa, dlse, block_mask=auto[0],
                                          deterministic=deterministic)
        return _attention_backward_cuda(q, k, v, o, lse, do, causal, scale, score_mod, mask_mod,
                                        enable_gqa, dlse, block_m, block_n, deterministic)
    return _attention_backward_host(q, k, v, o, lse, do, causal, scale, score_mod, mask_mod,
                                    enable_gqa, dlse, block_m, block_n)


# Whether attention_backward's CUDA calls with a mask_mod that reads tensors (and no block_mask)
# visit the blocks of the block mask the forward made (blocksparse.auto_block_mask), as
# tessel.attention's autograd does, instead of every block with the mask evaluated: the same
# programs as autograd's (a compiled graph's backward op equals eager bit for bit) and fewer
# blocks. On since its GPU check (2026-12-07, an H100, torch 2.11): test_block_mask_gpu.py with
# it on 71/71, test_torch_compile_gpu.py (its test_document_mask_inductor_fullgraph turns it
# on) with test_captured_gpu.py 27/27 (bench/results/2026-12-07-s53/out).
AUTO_BLOCK_MASK = True


def _value_dim_padded(fn, q, k, v, o, lse, do, causal, scale, *args):
    """fn's gradients where v (o, dO) has a head dim of its own that fn's programs do not take
    as it is: v, o and dO with zero columns up to q's head dim (o's extra columns are P·0 = 0,
    so Δ and dP do not change), dv cut back to v's columns. Ev > D is refused: the callers pad
    q and k for it (attention.call_with_value_head_dim)."""
    from .attention import _pad_columns, softmax_scale
    D, Ev = q.shape[-1], v.shape[-1]
    if Ev > D:
        raise ValueError(f"tessel.attention_backward: v's head dim {Ev} is wider than q's {D}: "
                         "pad q and k to it (tessel.attention does so)")
    dq, dk, dv = fn(q, k, *(_pad_columns(x, D) for x in (v, o)), lse, _pad_columns(do, D),
                    causal, softmax_scale(scale, D), *args)
    dv = dv[..., :Ev]
    return dq, dk, (dv.contiguous() if gpu.is_torch_tensor(dv) else np.ascontiguousarray(dv))


def _attention_backward_host(q, k, v, o, lse, do, causal, scale, score_mod, mask_mod,
                             enable_gqa, dlse, block_m, block_n, keyrows=False, fused_dq=False,
                             block_dim=0):
    """attention_backward on numpy arrays (the interpreter); `keyrows` runs the fast paths'
    key-rows dK/dV program instead of the group-looping one, `fused_dq` with dQ added up in it
    (FUSED_DQ) instead of by the dQ program, `block_dim` (with keyrows) the programs with
    blocks that wide (DB: BLOCK_HEAD_DIM_CHIPS) — their tests."""
    arrays = {"q": q, "k": k, "v": v, "o": o, "lse": lse, "do": do}
    for name, x in arrays.items():
        if not isinstance(x, np.ndarray):
            raise TypeError(f"{name} must be a numpy array (interpreter) or a CUDA torch tensor "
                            f"(GPU), got {type(x).__name__}")
    if not (q.dtype == k.dtype == v.dtype == o.dtype == do.dtype):
        raise TypeError(f"q, k, v, o and do differ in dtype: "
                        f"{', '.join(str(x.dtype) for x in (q, k, v, o, do))}")
    if v.shape[-1] != q.shape[-1] and not (keyrows and not fused_dq and not block_dim):
        return _value_dim_padded(_attention_backward_host, q, k, v, o, lse, do, causal, scale,
                                 score_mod, mask_mod, enable_gqa, dlse, block_m, block_n,
                                 keyrows, fused_dq, block_dim)
    shapes, scale, cx = _config(q, k, v, causal, scale, score_mod, mask_mod, enable_gqa,
                                block_m, block_n, value_dim=True)
    if block_dim:
        cx = dict(cx, DB=block_dim)
    B, H, Nq, D, Hkv, Nk = shapes
    Ev = v.shape[3]
    if o.shape != (B, H, Nq, Ev) or do.shape != o.shape or lse.shape != (B, H, Nq):
        raise ValueError(f"o and do must have shape {(B, H, Nq, Ev)} (q's, at v's head dim) and "
                         f"lse {(B, H, Nq)}; got {tuple(o.shape)}, {tuple(do.shape)}, "
                         f"{tuple(lse.shape)}")
    q, k, v, o, do = (np.ascontiguousarray(x) for x in (q, k, v, o, do))
    lse = np.ascontiguousarray(lse, dtype=np.float32)
    dlse = np.zeros((B, H, Nq), np.float32) if dlse is None else \
        np.ascontiguousarray(np.broadcast_to(dlse, (B, H, Nq)), dtype=np.float32)
    delta = np.zeros((B, H, Nq), np.float32)
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    dq32 = None
    if fused_dq:
        if q.dtype == np.uint16:
            raise NotImplementedError("the fused dQ's cast on host arrays takes float16 or "
                                      "float32, not bf16 bits")
        dq32 = np.zeros(q.shape, np.float32)
    if not keyrows or H == Hkv:
        _run(q, k, v, o, lse, do, dlse, delta, dq, dk, dv, shapes, scale, cx, keyrows,
             dq32=dq32)
        return (dq if dq32 is None else dq32.astype(q.dtype)), dk, dv
    if k.dtype == np.uint16:
        raise NotImplementedError("the key-rows program's GQA sum on host arrays takes float16 "
                                  "or float32, not bf16 bits")
    dk_h = np.zeros((B, H, Nk, D), k.dtype)
    dv_h = np.zeros((B, H, Nk, Ev), v.dtype)
    _run(q, k, v, o, lse, do, dlse, delta, dq, dk_h, dv_h, shapes, scale, cx, keyrows,
         dq32=dq32)
    group = (B, Hkv, H // Hkv, Nk)
    dq = dq if dq32 is None else dq32.astype(q.dtype)
    return (dq, dk_h.reshape(group + (D,)).astype(np.float32).sum(2).astype(k.dtype),
            dv_h.reshape(group + (Ev,)).astype(np.float32).sum(2).astype(v.dtype))


def compile_attention_backward(q, k, v, causal=False, scale=None, score_mod=None,
                               mask_mod=None, enable_gqa=False, block_m=None, block_n=None):
    """The backward's kernels for these inputs (numpy arrays), compiled but not run.

    Takes :func:`attention`'s arguments.

    Returns:
        dict: ``{"delta": ..., "dkdv": ..., "dq": ...}``, each a :class:`tessel.CompiledKernel`.
    """
    shapes, scale, cx = _config(q, k, v, causal, scale, score_mod, mask_mod, enable_gqa,
                                block_m, block_n)
    B, H, Nq, D, Hkv, Nk = shapes
    row = np.zeros((B, H, Nq), np.float32)
    dkdv_args = (q, k, v, q, row, row, k, v, Nq, Nk, H, Hkv, scale)
    return {"delta": attention_bwd_delta.warmup(q, q, row, row, Nq, H, D=D,
                                                BLOCK_M=cx["BLOCK_M"]),
            "dkdv": attention_bwd_dkdv.warmup(*dkdv_args, **cx),
            "dq": attention_bwd_dq.warmup(q, k, v, q, row, row, q, Nq, Nk, H, Hkv, scale, **cx,
                                          **even_blocks(shapes, cx, cx)[1])}


def gpu_backward_blocks(D, dtype):
    """(BLOCK_M, BLOCK_N) of the backward programs on the reference lowering, for head dim D
    and dtype name.

    The reference lowering (convert-tile-to-gpu) keeps every live tile in shared memory: at
    64×64 blocks the dK/dV program needs 300-460 KB of it, over any CTA's budget. Measured with
    ptxas (sm_80, causal, softcap): 32×32 needs 101 KB (dK/dV) at d64 f16; 32×16, 85 KB at d128
    f16 and 109 KB at d128 f32 — under sm_80's 163 KB. test_attention_backward.py compiles
    them."""
    if D <= 64 and dtype in ("f16", "bf16"):
        return 32, 32
    return 32, 16


# Head dim -> (BLOCK_M, BLOCK_N) of the fast paths' backward (f16/bf16): the query and key
# blocks of both the dQ program and the key-rows dK/dV program. docs/dev/backward.md says why.
FAST_BACKWARD_BLOCKS = {64: (64, 64), 128: (64, 64), 192: (64, 64), 256: (64, 64)}
# Head dim -> (BLOCK_M, BLOCK_N) of the dQ program alone on sm_90a, where it differs from the
# above: at d128 two warpgroups of 64 query rows against 128 keys, 4–6 % faster than 64×64 on
# the H200 (docs/bench/2026-12-02-h200-backward-dot-order.md, "Blocks per program").
FAST_DQ_BLOCKS_SM90 = {128: (128, 128)}
# Head dim -> (BLOCK_M, BLOCK_N) of the key-rows dK/dV program alone on sm_90a, where it differs
# from FAST_BACKWARD_BLOCKS (BLOCK_N keys are the rows: 128 takes two warpgroups).
FAST_KEYROWS_BLOCKS_SM90 = {}
# Head dims whose fast backward programs fit some chips only: at d256 they need 192 KiB of
# shared memory (three 64x256 A/B blocks beside K and V), more than sm_80's 163; sm_80 keeps the
# reference lowering there. 192: NATIVE_BACKWARD_HEAD_DIMS' chips.
_FAST_BACKWARD_CHIPS = {256: ("sm_90a",)}
# chip -> head dims the fast backward takes as they are where the forward runs them natively
# (attention.NATIVE_HEAD_DIMS; sm_80's mma.sync keeps 64/128/256). sm_90a 192: three
# 64-column slabs as the forward's; the key-rows program split (SPLIT_KEYROWS), whose dV part
# spills nothing and dK part 0 bytes non-causal, 20 causal; the dQ program 0 (ptxas, CUDA
# 13.0; test_spills.py). With 192 listed, tessel.attention runs d192 natively with gradients
# too, and attention_backward at 192 takes it instead of the reference lowering (padded
# calls already ran at 256); not with a mask_mod or block mask, as the forward. On since its
# GPU check (H100, 2026-12-06: `test_native_head_dim_192_backward` 36/36 against float64;
# forward + backward fp16 TFLOP/s padded -> native 203 -> 274 at 16k, 192 -> 248 16k causal,
# 148 -> 216 4k causal: docs/bench/2026-12-06-h100-s42.md).
NATIVE_BACKWARD_HEAD_DIMS = {"sm_90a": (192,)}


def native_backward(D, chip):
    """Whether the fast backward takes head dim D as it is on `chip` (NATIVE_BACKWARD_HEAD_DIMS),
    where the fast paths' tables (FAST_BACKWARD_BLOCKS) list a head dim the forward pads."""
    return D in NATIVE_BACKWARD_HEAD_DIMS.get(chip, ())


def _with_blocks(cx, blocks):
    """cx with (BLOCK_M, BLOCK_N) = blocks, or cx itself for None."""
    return cx if blocks is None else dict(cx, BLOCK_M=blocks[0], BLOCK_N=blocks[1])


def _fast_backward_config(q, k, v, causal, scale, score_mod, mask_mod, enable_gqa,
                          block_m=None, block_n=None, block_dim=0, value_dim=False):
    """The fast paths' configuration (shapes, scale, constexprs) for these CUDA tensors, or None
    where the backward takes the reference lowering: fp32, head dims other than 64, 128 and 256
    (256 on sm_90a only; 192 without a mask_mod where NATIVE_BACKWARD_HEAD_DIMS lists it), or
    blocks asked for that the fast paths do not take (other than 64 or 128). `block_dim`: the
    blocks' head dim where it is not q's (the programs' DB, BLOCK_HEAD_DIM_CHIPS), whose
    tables the programs then take."""
    dtype = gpu.torch_dtype_name(q)
    D = block_dim or q.shape[-1]
    blocks = FAST_BACKWARD_BLOCKS.get(D)
    if dtype not in ("f16", "bf16") or blocks is None:
        return None
    chips = _FAST_BACKWARD_CHIPS.get(D)
    if chips is not None or D not in (64, 128):
        from .attention import _chip_for_blocks
        chip = _chip_for_blocks(q)
        # (natively: as the forward, without a mask_mod, block masks' included)
        if chip not in (chips or ()) and not (native_backward(D, chip) and mask_mod is None):
            return None
    blocks = (block_m or blocks[0], block_n or blocks[1])
    if not set(blocks) <= {64, 128}:
        return None
    # Mods that read captured tensors gather into registers on the fast paths, as in the
    # forward (since 2026-12-02; before, they took the reference lowering).
    shapes, scale, cx = _config(q, k, v, causal, scale, score_mod, mask_mod, enable_gqa,
                                *blocks, value_dim=value_dim)
    return shapes, scale, (dict(cx, DB=block_dim) if block_dim else cx)


# The chips on which the fast backward takes the head dims that attention.padded_head_dim pads
# (96, 80, 40, 160, ...: Phi-3's 96) with blocks of the padded head dim over q, k, v, o and dO
# as they are (the dQ, key-rows and Δ programs' DB: columns past D read as 0, dq, dk and dv
# stored D wide), where D is a multiple of 8 and v has q's head dim (attention.pads_in_kernel).
# Elsewhere such a call runs the fast programs on copies padded to that head dim
# (_backward_padded), not the reference lowering. With the forward's
# attention.BLOCK_HEAD_DIM_CHIPS too, tessel.attention with gradients runs both that way
# (nothing padded is copied or saved for the backward). sm_90a's and sm_80's dQ programs
# compile with 0 spill at 96 and 80, the key-rows programs with no more than d128's
# (test_spills.py). sm_90a since its GPU check (H100, 2026-12-06:
# test_attention_backward_gpu.py `test_block_head_dim_backward` and
# `test_attention_backward_at_padded_head_dims` 40/40 against float64, 32/32 with
# trim_zero_columns; d96 attention_backward 1.16-1.34x the padded copies, bit for bit the same
# gradients: docs/bench/2026-12-06-h100-s43.md). sm_80's code has not run.
BLOCK_HEAD_DIM_CHIPS = ("sm_90a",)


def backward_block_dim(q, k, v, o, do, mask_mod):
    """How the CUDA backward takes q's head dim D: 0 as it is (64, 128, 256; 192 where
    NATIVE_BACKWARD_HEAD_DIMS lists it without a mask_mod; fp32 and the other dtypes),
    else (Dp, inside): the head dim attention.padded_head_dim pads D to, and whether the
    programs pad it themselves (BLOCK_HEAD_DIM_CHIPS; with a mask_mod only where
    attention.BLOCK_HEAD_DIM_MASKS lets it through) rather than run on padded copies."""
    from .attention import _chip_for_blocks, block_head_dim_masked, padded_head_dim, \
        pads_in_kernel
    D = q.shape[-1]
    if not all(x.shape[-1] == D for x in (k, v, o, do)):
        return 0
    Dp = padded_head_dim(D, gpu.torch_dtype_name(q))
    if Dp is None:
        return 0
    chip = _chip_for_blocks(q)
    if native_backward(D, chip) and mask_mod is None:
        return 0
    return Dp, chip in BLOCK_HEAD_DIM_CHIPS and pads_in_kernel(q, v, Dp) and \
        not block_head_dim_masked(mask_mod, None)


def sparse_block_dim(q, k, v, o, do):
    """The blocks' head dim of the block-sparse backward's programs for these CUDA tensors
    where it is not q's (their DB: attention.BLOCK_HEAD_DIM_SPARSE, and BLOCK_HEAD_DIM_CHIPS
    has the chip), else 0."""
    from .attention import BLOCK_HEAD_DIM_SPARSE
    if not BLOCK_HEAD_DIM_SPARSE:
        return 0
    from .attention import _chip_for_blocks, padded_head_dim, pads_in_kernel
    D = q.shape[-1]
    if not all(x.shape[-1] == D for x in (k, v, o, do)):
        return 0
    Dp = padded_head_dim(D, gpu.torch_dtype_name(q))
    ok = _chip_for_blocks(q) in BLOCK_HEAD_DIM_CHIPS and pads_in_kernel(q, v, Dp)
    return Dp if ok else 0


def _backward_padded(q, k, v, o, lse, do, Dp, scale, *args):
    """_attention_backward_cuda on copies of q, k, v, o and dO with zero columns up to head dim
    Dp (the forward's padding, attention.padded_head_dim), the gradients cut back to D columns:
    zero columns change neither the scores nor Δ, and their gradients are zero."""
    from .attention import _pad_columns, softmax_scale
    D = q.shape[-1]
    grads = _attention_backward_cuda(*(_pad_columns(x, Dp) for x in (q, k, v, o)), lse,
                                     _pad_columns(do, Dp), args[0], softmax_scale(scale, D),
                                     *args[1:])
    return tuple(g[..., :D].contiguous() for g in grads)


# Chips whose fast backward takes a v narrower than q as it is (the key-rows and dQ programs'
# DV: dP and dV at v's width, DeepSeek's MLA training at 192/128), instead of v, o and dO padded
# to q's head dim. sm_90a since its GPU check (H100, forty-ninth session: test_python_gpu.py
# `test_value_head_dim_of_its_own` dv_programs 8/8 against float64 autograd; forward + backward
# fp16 with attention.VALUE_HEAD_DIM_GRAD, against the padded call: 192/128 1.28x / 1.45x at
# 4k non-causal / causal, 1.08x / 1.28x at 16k; 128/64 1.17-1.27x;
# docs/bench/2026-12-07-h100-s49.md). sm_80's programs have not run.
VALUE_HEAD_DIM_BACKWARD_CHIPS = ("sm_90a",)
# The head dims v may have there: widths the fast paths' tiles take.
VALUE_HEAD_DIMS = (64, 128)


def value_dim_backward(q, v, score_mod, mask_mod, block_m, block_n):
    """Whether the CUDA backward runs v's own head dim through the programs' DV
    (VALUE_HEAD_DIM_BACKWARD_CHIPS): v narrower than q, one of VALUE_HEAD_DIMS, q's head dim
    one the fast programs take as it is, the default blocks, no mods (their DV programs have
    run on the interpreter only)."""
    from .attention import _chip_for_blocks
    D, Ev = q.shape[-1], v.shape[-1]
    chip = _chip_for_blocks(q)
    return chip in VALUE_HEAD_DIM_BACKWARD_CHIPS and Ev < D and Ev in VALUE_HEAD_DIMS and \
        (D in (64, 128, 256) or native_backward(D, chip)) and block_m is None and \
        block_n is None and score_mod is None and mask_mod is None


def _attention_backward_cuda(q, k, v, o, lse, do, causal, scale, score_mod, mask_mod,
                             enable_gqa, dlse, block_m, block_n, deterministic=False):
    """The backward on CUDA tensors. fp16/bf16 at head dims 64 and 128 take the fast paths
    (codegen auto: wgmma on sm_90a, mma.sync on sm_80): the dQ program and the key-rows dK/dV
    program, Δ by attention_bwd_delta (delta_cuda). The rest runs the three programs of
    the interpreter on the reference lowering, with the small blocks it needs. A v (o, dO) of
    its own head dim takes the programs' DV where value_dim_backward allows, else is padded
    to q's (_value_dim_padded)."""
    torch = gpu.torch_module()
    value_dim = v.shape[-1] != q.shape[-1]
    if value_dim and not value_dim_backward(q, v, score_mod, mask_mod, block_m, block_n):
        return _value_dim_padded(_attention_backward_cuda, q, k, v, o, lse, do, causal, scale,
                                 score_mod, mask_mod, enable_gqa, dlse, block_m, block_n,
                                 deterministic)
    padded = backward_block_dim(q, k, v, o, do, mask_mod)
    # At a head dim the forward pads, the fast programs at the padded one (inside them, or on
    # padded copies); where they do not take it either, the reference lowering at D.
    block_dim = padded[0] if padded else 0
    fast = _fast_backward_config(q, k, v, causal, scale, score_mod, mask_mod, enable_gqa,
                                 block_m, block_n, block_dim, value_dim)
    if value_dim and fast is None:
        return _value_dim_padded(_attention_backward_cuda, q, k, v, o, lse, do, causal, scale,
                                 score_mod, mask_mod, enable_gqa, dlse, block_m, block_n,
                                 deterministic)
    if fast is not None and padded and not padded[1]:
        return _backward_padded(q, k, v, o, lse, do, padded[0], scale, causal, score_mod,
                                mask_mod, enable_gqa, dlse, block_m, block_n, deterministic)
    if fast is None:
        block_dim = 0
    # The fast programs read q, k, v, o and dO in place where layouts.row_layout allows
    # (FlashAttention's [B, N, H, D] seen as [B, H, N, D]); the reference route copies.
    keep = in_place if fast is not None and STRIDED_BACKWARD else contiguous_aligned
    q, k, v, o, do = (keep(x) for x in (q, k, v, o, do))
    lse = lse.contiguous().float()
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    if fast is None:
        dm, dn = gpu_backward_blocks(q.shape[-1], gpu.torch_dtype_name(q))
        block_m, block_n = block_m or dm, block_n or dn
        shapes, scale, cx = _config(q, k, v, causal, scale, score_mod, mask_mod, enable_gqa,
                                    block_m, block_n)
    else:
        shapes, scale, cx = fast
        cx = dict(cx, **layout_constexprs(Q=q, K=k, V=v, DO=do))
    B, H, Nq, D, Hkv, Nk = shapes
    W = block_dim or D                          # the blocks' head dim: the tables'
    # Each program's blocks where sm_90a's tables set them apart (asked-for blocks set both).
    dq_cx = kr_cx = cx
    from .attention import _chip_for_blocks
    chip = _chip_for_blocks(q) if fast is not None else None
    if chip == "sm_90a" and block_m is None and block_n is None:
        dq_cx = _with_blocks(cx, FAST_DQ_BLOCKS_SM90.get(W))
        kr_cx = _with_blocks(cx, FAST_KEYROWS_BLOCKS_SM90.get(W))
    dlse = zeros_scratch(lse, B * H * Nq) if dlse is None else \
        dlse.float().expand(B, H, Nq).contiguous()
    dk, dv = (torch.empty(x.shape, dtype=x.dtype, device=x.device) for x in (k, v))
    if fast is None:
        delta = torch.empty_like(lse)
        _run(q, k, v, o, lse, do, dlse, delta, dq, dk, dv, shapes, scale, cx)
        return dq, dk, dv
    # GQA: one dK/dV block per query head, summed over each group after (FA2's way).
    Ev = v.shape[3]
    dk_h, dv_h = (dk, dv) if H == Hkv else (k.new_empty(B, H, Nk, D), v.new_empty(B, H, Nk, Ev))
    side = _side_stream(q.device) if CONCURRENT_DQ else None
    dq32 = None
    # dQᵀ's rows are the head dim: one accumulator of BLOCK_N rows, or two halves.
    if not block_dim and not value_dim and kr_cx["BLOCK_N"] <= D <= 2 * kr_cx["BLOCK_N"] and \
            _fused_dq(q, D, deterministic):
        dq32 = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
        side = None

    def programs(launch, side=side):
        delta = delta_cuda(o, do, dlse, launch=launch, block_dim=block_dim)
        _run(q, k, v, o, lse, do, dlse, delta, dq, dk_h, dv_h, shapes, scale, kr_cx,
             keyrows=True, delta_ready=True, dq_cx=dq_cx, side=side, dq32=dq32, launch=launch,
             chip=chip)
    _compile_programs(chip, programs, (q.dtype, tuple(kr_cx.items()), tuple(dq_cx.items()),
                                       dq32 is None, tuple(layout_constexprs(O=o, DO=do).items()),
                                       tuple((part, tuple(c.items())) for part, c in
                                             keyrows_launches(shapes, kr_cx, dq_cx)),
                                       bool(even_blocks(shapes, kr_cx, dq_cx)[1])))
    programs(_launch)
    if dq32 is not None:
        dq.copy_(dq32)
    if H != Hkv:
        torch.sum(dk_h.view(B, Hkv, H // Hkv, Nk, D), dim=2, out=dk)
        torch.sum(dv_h.view(B, Hkv, H // Hkv, Nk, Ev), dim=2, out=dv)
    return dq, dk, dv


# Keys of the backward calls whose programs are compiled (_compile_programs): (chip, dtype and
# the programs' constexprs), never the shapes.
_compiled = set()


def _compile_programs(chip, programs, signature):
    """Before the first call of a backward `signature` on `chip`: traces the programs that
    `programs(launch)` launches (without launching them) and compiles their binaries side by
    side (cache.get_binaries; each compile lets the GIL go), so that a first backward call
    costs its slowest program's compile instead of the sum of the three (Δ, dQ, key-rows).
    Later calls of the signature do nothing here. `signature` is hashable: tuples, mods as
    they come (a mod compares and hashes without its function); what is kept is _hashable's
    copy, which holds no function."""
    if (chip, signature) in _compiled:
        return
    traced = []
    programs(lambda program, grid, *args, **cx: traced.append(
        (program.warmup(*args, **cx), program.options.gpu_options(chip))), side=None)
    from . import cache
    cache.get_binaries(traced)
    _compiled.add((chip, _hashable(signature)))


def _hashable(x):
    """x with its dicts as sorted item tuples (a key of constexprs), and mods without the
    function they were bound to (which may hold tensors: the key must not keep them alive)."""
    if getattr(x, "user_fn", None) is not None:
        return x.bound_to(None)
    if isinstance(x, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in x.items()))
    if isinstance(x, (tuple, list)):
        return tuple(_hashable(v) for v in x)
    return x


# Head dims whose sm_90a backward adds dQ up in the key-rows dK/dV program (FUSED_DQ: dQᵀ =
# Kᵀ·dSᵀ, float32 atomic adds) instead of running the dQ program, which recomputes S and dP:
# five matmuls per block pair instead of seven. Not with `deterministic`, nor where the
# key-rows program is split (SPLIT_KEYROWS). Empty until the H200 says it is faster: with
# element atomics it measured 0.40–0.72× the separate program (2026-12-03,
# docs/dev/backward.md, "dQ from the key-rows program"); `bench_backward.py --fused-dq`.
FUSED_DQ_DIMS = ()


def _fused_dq(q, D, deterministic):
    """Whether this CUDA backward takes dQ from the key-rows program (FUSED_DQ_DIMS)."""
    if deterministic or D not in FUSED_DQ_DIMS or D in SPLIT_KEYROWS:
        return False
    torch = gpu.torch_module()
    if torch.are_deterministic_algorithms_enabled():
        return False
    from .attention import _chip_for_blocks
    return _chip_for_blocks(q) == "sm_90a"


_function = None

# Head dims whose key-rows dK/dV program runs as two programs, dV then dK (PART 1 and 2): at
# d256 the two 64×256 float32 accumulators spill 3.4–4.7 KB a thread on sm_90a (ptxas); apart,
# the dV program spills nothing and the dK program 960 bytes, for 1.25× the dots (Sᵀ twice).
# H200 (2026-12-03, `bench_backward.py --dims 256 [--no-split-keyrows]`): 1.45–1.66× faster than
# the one program (d256 n16k 45.2 → 28.7 ms non-causal, 20.4 → 14.1 causal). d192 (native,
# NATIVE_BACKWARD_HEAD_DIMS): whole, 648 bytes non-causal and 2,892 causal; apart 0 and 0 / 20.
SPLIT_KEYROWS = (192, 256)

# Head dim -> the query rows (BLOCK_M) of the split's dK program (PART 2) where they differ from
# the dV program's. ptxas, sm_90a d256 at 32 rows against 64 (CUDA 13.0, 2026-12-06): 228
# registers and no spill non-causal (was 255 and 104 bytes), 60–120 bytes causal (was
# 636–1,164), for wgmma of N = 32 and twice the loop's trips. Empty until the H200 times it
# (`bench_backward.py --dims 256 --dk-block-m 32`; docs/dev/backward.md).
KEYROWS_DK_BLOCK_M = {}

# Whether the fast backward runs its dQ program on a second stream, beside the dK/dV program
# (each fills the other's last wave). Off: within noise on the H200 (−0.8 … +1.6 %, d128
# 4k–16k, `bench_backward.py --concurrent-dq`, docs/bench/2026-12-03-h200-backward-split.md).
CONCURRENT_DQ = False

# Whether the fast backward reads [B, N, H, D] views in place (layouts.row_layout) instead of
# copying q, k, v, o and dO first. On since test/gpu/test_python_gpu.py's
# test_strided_inputs_get_gradients[in-place] passed on the H200 (2026-12-03); False copies.
STRIDED_BACKWARD = True

# With a block mask, whether the CUDA backward runs blocksparse_backward's programs (empty
# blocks skipped, full ones without mask arithmetic) instead of the dense ones with the
# mask_mod. On since test/gpu/test_block_mask_gpu.py::test_gradients_with_a_block_mask[*-sparse]
# passed on the H200 (2026-12-02); False keeps the dense programs (a switch for comparisons).
SPARSE_BACKWARD_ON_GPU = True


def _autograd_function():
    """tessel.attention as a torch.autograd.Function (made on first use: tessel never imports
    torch). It saves q, k, v, O and the LSE — not P — and runs the three backward programs."""
    global _function
    if _function is not None:
        return _function
    torch = gpu.torch_module()
    from .attention import _attention_cuda

    class TesselAttention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, config):
            causal, scale, score_mod, mask_mod, enable_gqa, block_m, block_n, sparse, _, \
                block_dim = config
            if sparse is not None:
                # A block mask: the forward visits its blocks (the mask_mod it was made from,
                # causality folded in); the backward below runs the dense programs with the
                # mask_mod, which give the same gradients from the same O and LSE.
                from . import blocksparse
                o, lse = blocksparse.attention(q, k, v, scale, score_mod, sparse[1], enable_gqa,
                                               True, sparse[0], None, None, False, grad=False,
                                               block_dim=block_dim or None)
            else:
                o, lse = _attention_cuda(q, k, v, causal, scale, score_mod, mask_mod,
                                         enable_gqa, True, block_m, block_n, block_dim)
            ctx.save_for_backward(q, k, v, o, lse)
            ctx.config = config
            # An output nobody differentiates (the LSE, mostly) reaches backward as None, not
            # as a tensor of zeros made and filled per call.
            ctx.set_materialize_grads(False)
            return o, lse

        @staticmethod
        def backward(ctx, do, dlse):
            q, k, v, o, lse = ctx.saved_tensors
            causal, scale, score_mod, mask_mod, enable_gqa, block_m, block_n, sparse, \
                deterministic, _ = ctx.config
            if do is None:                  # only the LSE has a gradient
                do = torch.zeros_like(o)
            if sparse is not None:
                # The block mask's mask_mod has any causality folded in.
                dq, dk, dv = attention_backward(q, k, v, o, lse, do, False, scale, score_mod,
                                                sparse[1], enable_gqa, dlse,
                                                block_mask=sparse[0],
                                                deterministic=deterministic)
                return dq, dk, dv, None
            # The forward's block sizes are not the backward's (gpu_backward_blocks); a forward
            # with blocks wider than D (block_dim) meets a backward that takes them too
            # (backward_block_dim). A v narrower than q (attention.VALUE_HEAD_DIM_GRAD): the
            # programs' DV, or v, o and dO padded (_attention_backward_cuda decides).
            dq, dk, dv = _attention_backward_cuda(q, k, v, o, lse, do, causal, scale, score_mod,
                                                  mask_mod, enable_gqa, dlse, None, None,
                                                  deterministic)
            return dq, dk, dv, None

    _function = TesselAttention
    return _function


_differentiable = set()   # (score_mod, dtype name, D) whose backward was traced


def check_differentiable(score_mod, dtype, D, like=None):
    """Traces the dQ program (the chain rule through score_mod) once per score_mod, dtype name
    and head dim: a score_mod the compiler cannot differentiate is a CompilationError at its
    line when the forward is called, not at loss.backward(). The placeholders are placed like
    `like` (a CUDA tensor: a score_mod may capture CUDA tensors, which a kernel on host arrays
    refuses), else host arrays; nothing runs."""
    key = (score_mod, dtype, D)
    if score_mod is None or key in _differentiable:
        return
    if like is not None and gpu.is_torch_tensor(like):
        torch = gpu.torch_module()
        q = like.new_zeros((1, 1, 16, D))
        row = like.new_zeros((1, 1, 16), dtype=torch.float32)
    else:
        host = {"f16": np.float16, "bf16": np.uint16, "f32": np.float32}[dtype]
        q = np.zeros((1, 1, 16, D), host)
        row = np.zeros((1, 1, 16), np.float32)
    shapes, scale, cx = _config(q, q, q, False, None, score_mod, None, False, 16, 16)
    attention_bwd_dq.warmup(q, q, q, q, row, row, q, 16, 16, 1, 1, scale, **cx)
    _differentiable.add(key)


def attention_with_grad(q, k, v, causal, scale, score_mod, mask_mod, enable_gqa, return_lse,
                        block_m, block_n, block_mask=None, deterministic=False, block_dim=0):
    """tessel.attention on CUDA tensors that require grad: outputs with a grad_fn. With a
    block_mask (given, or built for a mask that reads tensors: blocksparse.auto_block_mask) the
    forward is block-sparse and the backward the dense programs with the mask_mod. block_dim:
    the forward's blocks' head dim where it is not D (attention.block_head_dim_takes, or
    block_head_dim_sparse with a block mask)."""
    check_differentiable(score_mod, gpu.torch_dtype_name(q), q.shape[-1], like=q)
    sparse = None
    if block_mask is not None:
        sparse = (block_mask, mask_mod)
    elif mask_mod is not None and block_m is None and block_n is None:
        from . import blocksparse
        sparse = blocksparse.auto_block_mask(q, k, causal, mask_mod, enable_gqa)
    config = (causal, scale, score_mod, mask_mod, enable_gqa, block_m, block_n, sparse,
              deterministic, block_dim)
    o, lse = _autograd_function().apply(q, k, v, config)
    return (o, lse) if return_lse else o
