"""The attention backward over a block mask: the dQ and key-rows dK/dV programs of backward.py
with indirect loops, so that empty blocks are skipped and full ones run without mask arithmetic,
as in the forward (blocksparse.py).

dQ of a query block walks the block mask's key-block lists (full, then partial), as the forward
does. dK/dV of a key block walks the *transposed* lists: the query blocks that see it, made from
the forward's lists once per block mask (`transposed_lists`, FlexAttention's q_indices):

    q_num_blocks      int32 [B', H', NKB]        partial query blocks of each key block
    q_indices         int32 [B', H', NKB, NQB]   ascending; the tail past q_num_blocks holds 0
    full_q_num_blocks int32 [B', H', NKB]
    full_q_indices    int32 [B', H', NKB, NQB]

The kernels' blocks divide the mask's (R_M, R_N kernel blocks per mask block). Rows past the
query length are masked in both loops of dK/dV: their dO and Δ read as zeros, but a score_mod's
bias there could overflow exp2.
"""
import numpy as np

from . import backward as dense, gpu
from . import language as tl
from .backward import (_compile_programs, _launch, delta_cuda, dq_query_block,
                       keyrows_key_block, log2_scores, masked, zeros_scratch)
from .blocksparse import list_descs
from .grid import block_and_row, fold_grid
from .jit import jit
from .layouts import contiguous_aligned
from .runtime import from_bf16, to_bf16


def transposed_lists(bm):
    """(q_num_blocks, q_indices, full_q_num_blocks, full_q_indices) of BlockMask `bm`, made once
    and kept on it: numpy arrays or CUDA tensors as bm holds."""
    hit = getattr(bm, "_transposed", None)
    if hit is not None:
        return hit
    on_gpu = bm.on_gpu
    nqb, nkb = bm.kv_indices.shape[2], bm.kv_indices.shape[3]
    lists = ((bm.kv_num_blocks, bm.kv_indices), (bm.full_kv_num_blocks, bm.full_kv_indices))
    if on_gpu:
        torch = gpu.torch_module()
        out = []
        for num, idx in lists:
            # The [B', H', NQB, NKB] membership of the lists (an extra column takes the unused
            # slots), transposed, then compacted in ascending order by a sort.
            slots = torch.arange(nkb, device=idx.device)
            used = slots < num[..., None]
            member = torch.zeros(idx.shape[:3] + (nkb + 1,), dtype=torch.bool, device=idx.device)
            member.scatter_(3, torch.where(used, idx.long(), nkb), True)
            member = member[..., :nkb].transpose(2, 3)
            rows = torch.arange(nqb, device=idx.device)
            order = torch.where(member, rows, nqb + rows).sort(dim=3).values
            count = member.sum(3, dtype=torch.int32)
            out += [count.contiguous(),
                    torch.where(rows < count[..., None], order, 0).to(torch.int32).contiguous()]
    else:
        out = []
        for num, idx in lists:
            slots = np.arange(nkb)
            used = slots < num[..., None]
            member = np.zeros(idx.shape[:3] + (nkb + 1,), bool)
            np.put_along_axis(member, np.where(used, idx, nkb), True, axis=3)
            member = np.swapaxes(member[..., :nkb], 2, 3)
            rows = np.arange(nqb)
            order = np.sort(np.where(member, rows, nqb + rows), axis=3)
            count = member.sum(3).astype(np.int32)
            out += [np.ascontiguousarray(count),
                    np.ascontiguousarray(np.where(rows < count[..., None], order, 0)
                                         .astype(np.int32))]
    bm._transposed = tuple(out)
    return bm._transposed


@jit
def head_descs(q, k, v, do, lse_in, delta, bh, nq, nk, H, HKV, D: tl.constexpr):
    """b, h, the first K/V row of h's KV head, and the descriptors of one (batch, query head)'s
    q, k, v, dO, LSE and Δ (BHSD, contiguous)."""
    b = bh // H
    h = bh % H
    q_rows = bh * nq
    kv_rows = (b * HKV + h // (H // HKV)) * nk
    return (b, h, kv_rows,
            tl.make_desc(q, shape=(nq, D), strides=(D, 1), offset=q_rows * D),
            tl.make_desc(k, shape=(nk, D), strides=(D, 1), offset=kv_rows * D),
            tl.make_desc(v, shape=(nk, D), strides=(D, 1), offset=kv_rows * D),
            tl.make_desc(do, shape=(nq, D), strides=(D, 1), offset=q_rows * D),
            tl.make_desc(lse_in, shape=(nq,), strides=(1,), offset=q_rows),
            tl.make_desc(delta, shape=(nq,), strides=(1,), offset=q_rows))


@jit
def dq_block(dq_acc, lists, row, t, kd, vd, qt, dot_, lse2, dlt, q_idx, scale, b, h, nk,
             D: tl.constexpr, BLOCK_N: tl.constexpr, MASK_N: tl.constexpr, PARTIAL: tl.constexpr,
             SCORE_MOD: tl.constexpr, MASK_MOD: tl.constexpr):
    """dQ += dS·K of the t-th kernel key block of list row `row` (scale applied at the store);
    the mask only in partial blocks."""
    R_N = MASK_N // BLOCK_N
    j = tl.load_scalar(lists, (row, t // R_N)) * MASK_N + (t % R_N) * BLOCK_N
    kt = tl.load(kd, (j, 0), shape=(BLOCK_N, D))
    vt = tl.load(vd, (j, 0), shape=(BLOCK_N, D))
    kv_idx = tl.broadcast_to((j + tl.arange(0, BLOCK_N))[None, :], q_idx.shape)
    s2, s_mod, s_raw = log2_scores(tl.dot(qt, kt.T), scale, b, h, q_idx, kv_idx, SCORE_MOD)
    if PARTIAL:
        s2 = masked(s2, b, h, q_idx, kv_idx, kv_idx < nk, False, MASK_MOD)
    p = tl.exp2(s2 - lse2[:, None])
    ds = p * (tl.dot(dot_, vt.T) - dlt[:, None])
    if SCORE_MOD is not None:
        ds = ds * tl.elementwise_grad(s_mod, s_raw)
    return dq_acc + tl.dot(ds.to(kt.dtype), kt)


@jit
def attention_bwd_dq_sparse(q, k, v, do, lse_in, delta, dq, kv_num, kv_idx_in, full_num,
                            full_idx_in, nq, nk, H, HKV, scale, bm_sb, bm_sh, n_rows,
                            D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            MASK_M: tl.constexpr, MASK_N: tl.constexpr,
                            SCORE_MOD: tl.constexpr, MASK_MOD: tl.constexpr,
                            DB: tl.constexpr = 0):
    """dQ of one query block over the block mask's key-block lists. DB: the blocks' head dim
    where it is not D (0: D), as backward.attention_bwd_dq's."""
    W = D if DB == 0 else DB
    R_M = MASK_M // BLOCK_M
    R_N = MASK_N // BLOCK_N
    n_kb = tl.cdiv(nk, MASK_N)
    pid_m, bh = block_and_row(tl.cdiv(nq, BLOCK_M))
    b, h, kv_rows, qd, kd, vd, dod, ld, dd = head_descs(q, k, v, do, lse_in, delta, bh, nq, nk,
                                                        H, HKV, D)
    dqd = tl.make_desc(dq, shape=(nq, D), strides=(D, 1), offset=bh * nq * D)
    row = b * bm_sb + h * bm_sh + pid_m // R_M
    cnd, idd, fcnd, fidd = list_descs(kv_num, kv_idx_in, full_num, full_idx_in, n_rows, n_kb)
    qt, dot_, lse2, dlt, q_idx = dq_query_block(qd, dod, ld, dd, pid_m * BLOCK_M, W, BLOCK_M,
                                                BLOCK_N)
    dq_acc = tl.zeros((BLOCK_M, W), tl.float32)
    for t in range(0, tl.load_scalar(fcnd, (row,)) * R_N):
        dq_acc = dq_block(dq_acc, fidd, row, t, kd, vd, qt, dot_, lse2, dlt, q_idx, scale, b, h,
                          nk, W, BLOCK_N, MASK_N, False, SCORE_MOD, MASK_MOD)
    for t in range(0, tl.load_scalar(cnd, (row,)) * R_N):
        dq_acc = dq_block(dq_acc, idd, row, t, kd, vd, qt, dot_, lse2, dlt, q_idx, scale, b, h,
                          nk, W, BLOCK_N, MASK_N, True, SCORE_MOD, MASK_MOD)
    tl.store(dqd, (pid_m * BLOCK_M, 0), (dq_acc * scale).to(qt.dtype))


@jit
def dkdv_block(dk_acc, dv_acc, lists, col, t, qd, dod, ld, dd, kt, vt, kv_idx, scale, b, h, nq,
               nk, D: tl.constexpr, BLOCK_M: tl.constexpr, MASK_M: tl.constexpr,
               PARTIAL: tl.constexpr, SCORE_MOD: tl.constexpr, MASK_MOD: tl.constexpr,
               PART: tl.constexpr = 0):
    """dK += dSᵀ·Q and dV += Pᵀ·dO of the t-th kernel query block of list row `col`, keys as
    rows (backward.py's key-rows form); the mask_mod only in partial blocks, the query length
    in both. PART as the key-rows program's: 0 both, 1 dV alone, 2 dK alone."""
    R_M = MASK_M // BLOCK_M
    i = tl.load_scalar(lists, (col, t // R_M)) * MASK_M + (t % R_M) * BLOCK_M
    qt = tl.load(qd, (i, 0), shape=(BLOCK_M, D))
    dot_ = tl.load(dod, (i, 0), shape=(BLOCK_M, D))
    q_idx = tl.broadcast_to((i + tl.arange(0, BLOCK_M))[None, :], kv_idx.shape)
    st = tl.dot(kt, qt.T)
    if D == 128 and PART != 1:
        dp = tl.dot(vt, dot_.T)                 # beside Sᵀ, as backward.py's key-rows program
    s2, s_mod, s_raw = log2_scores(st, scale, b, h, q_idx, kv_idx, SCORE_MOD)
    lse = tl.load(ld, (i,), shape=(BLOCK_M,))
    lse2 = tl.where(lse == float("-inf"), 0.0, lse) * 1.4426950408889634   # no key: P = 0
    if PARTIAL:
        s2 = masked(s2, b, h, q_idx, kv_idx, (kv_idx < nk) & (q_idx < nq), False, MASK_MOD)
    else:
        s2 = tl.where(q_idx < nq, s2, float("-inf"))
    p = tl.exp2(s2 - lse2[None, :])
    if PART != 2:
        dv_acc += tl.dot(p.to(dot_.dtype), dot_)
    if PART != 1:
        if D != 128:
            dp = tl.dot(vt, dot_.T)
        ds = p * (dp - tl.load(dd, (i,), shape=(BLOCK_M,))[None, :])
        if SCORE_MOD is not None:
            ds = ds * tl.elementwise_grad(s_mod, s_raw)
        dk_acc += tl.dot(ds.to(qt.dtype), qt)
    return dk_acc, dv_acc


@jit
def attention_bwd_dkdv_sparse(q, k, v, do, lse_in, delta, dk, dv, q_num, q_idx_in, full_num,
                              full_idx_in, nq, nk, H, HKV, OUT_HEADS, scale, bm_sb, bm_sh,
                              n_cols, D: tl.constexpr, BLOCK_M: tl.constexpr,
                              BLOCK_N: tl.constexpr, MASK_M: tl.constexpr, MASK_N: tl.constexpr,
                              SCORE_MOD: tl.constexpr, MASK_MOD: tl.constexpr,
                              PART: tl.constexpr = 0, DB: tl.constexpr = 0):
    """dK and dV of one key block for one query head over the transposed lists (the query
    blocks that see it); OUT_HEADS, PART and DB as in backward.attention_bwd_dkdv_keyrows."""
    W = D if DB == 0 else DB
    R_M = MASK_M // BLOCK_M
    R_N = MASK_N // BLOCK_N
    n_qb = tl.cdiv(nq, MASK_M)
    pid_n, bh = block_and_row(tl.cdiv(nk, BLOCK_N))
    b, h, kv_rows, qd, kd, vd, dod, ld, dd = head_descs(q, k, v, do, lse_in, delta, bh, nq, nk,
                                                        H, HKV, D)
    out_rows = (b * OUT_HEADS + h * OUT_HEADS // H) * nk
    dkd = tl.make_desc(dk, shape=(nk, D), strides=(D, 1), offset=out_rows * D)
    dvd = tl.make_desc(dv, shape=(nk, D), strides=(D, 1), offset=out_rows * D)
    col = b * bm_sb + h * bm_sh + pid_n // R_N
    cnd, idd, fcnd, fidd = list_descs(q_num, q_idx_in, full_num, full_idx_in, n_cols, n_qb)
    n0 = pid_n * BLOCK_N
    kt, vt, kv_idx, dk_acc, dv_acc = keyrows_key_block(kd, vd, n0, W, BLOCK_M, BLOCK_N, PART)
    for t in range(0, tl.load_scalar(fcnd, (col,)) * R_M):
        dk_acc, dv_acc = dkdv_block(dk_acc, dv_acc, fidd, col, t, qd, dod, ld, dd, kt, vt, kv_idx,
                                    scale, b, h, nq, nk, W, BLOCK_M, MASK_M, False, SCORE_MOD,
                                    MASK_MOD, PART)
    for t in range(0, tl.load_scalar(cnd, (col,)) * R_M):
        dk_acc, dv_acc = dkdv_block(dk_acc, dv_acc, idd, col, t, qd, dod, ld, dd, kt, vt, kv_idx,
                                    scale, b, h, nq, nk, W, BLOCK_M, MASK_M, True, SCORE_MOD,
                                    MASK_MOD, PART)
    if PART != 1:
        tl.store(dkd, (n0, 0), (dk_acc * scale).to(kt.dtype))
    if PART != 2:
        tl.store(dvd, (n0, 0), dv_acc.to(kt.dtype))


def run(q, k, v, lse, do, delta, dq, dk, dv, bm, scale, score_mod, mask_mod, block_m, block_n,
        launch=_launch, dq_block_n=None, block_dim=0):
    """Both programs over block mask `bm` (Δ given). dk and dv have H heads under GQA (one per
    query head, for the caller to sum) or Hkv; arrays or CUDA tensors alike. `launch`: as
    backward._run's. `dq_block_n`: the dQ program's key block where it is smaller than
    `block_n` (it divides it). `block_dim`: the blocks' head dim where it is not D (DB)."""
    from .attention import _as_jit
    B, H, Nq, D = q.shape
    Hkv, Nk = k.shape[1], k.shape[2]
    nbh, nqb = bm.kv_num_blocks.shape[1], bm.kv_num_blocks.shape[2]
    nkb = bm.kv_indices.shape[3]
    sb = nbh * nqb if bm.shape[0] is not None else 0
    sh = nqb if bm.shape[1] is not None else 0
    cx = dict(D=D, BLOCK_M=block_m, BLOCK_N=block_n, MASK_M=bm.BLOCK_M, MASK_N=bm.BLOCK_N,
              SCORE_MOD=_as_jit(score_mod, "score_mod"), MASK_MOD=_as_jit(mask_mod, "mask_mod"),
              **({"DB": block_dim} if block_dim else {}))
    W = block_dim or D                          # the blocks' head dim: the tables'
    if B * H and Nq and Nk:
        launch(attention_bwd_dq_sparse, fold_grid(-(-Nq // block_m), B * H),
            q, k, v, do, lse, delta, dq, bm.kv_num_blocks, bm.kv_indices, bm.full_kv_num_blocks,
            bm.full_kv_indices, Nq, Nk, H, Hkv, scale, sb, sh,
            int(np.prod(bm.kv_num_blocks.shape)),
            **dict(cx, BLOCK_N=min(block_n, dq_block_n or block_n)))
        tq = transposed_lists(bm)
        # Where the dense backward splits dV and dK (backward.SPLIT_KEYROWS: their two float32
        # accumulators spill beside each other), so does this one: PART 1, then 2 — the dK
        # program on query blocks of its own where the dense one's are (KEYROWS_DK_BLOCK_M).
        for part in ((1, 2) if W in dense.SPLIT_KEYROWS else (0,)):
            part_cx = dense.keyrows_part_blocks(cx, W, part)
            part_cx = dict(part_cx, BLOCK_M=min(part_cx["BLOCK_M"], block_m))
            launch(attention_bwd_dkdv_sparse, fold_grid(-(-Nk // block_n), B * H),
                q, k, v, do, lse, delta, dk, dv, tq[0], tq[1], tq[2], tq[3], Nq, Nk, H, Hkv,
                dk.shape[1], scale, nbh * nkb if bm.shape[0] is not None else 0,
                nkb if bm.shape[1] is not None else 0, int(np.prod(tq[0].shape)), **part_cx,
                **({"PART": part} if part else {}))


def backward(q, k, v, o, lse, do, bm, scale, score_mod, mask_mod, block_m, block_n, dlse=None,
             block_dim=0):
    """(dq, dk, dv) over block mask `bm`: numpy arrays (the interpreter; float32, float16 or
    bf16 bit patterns) or CUDA tensors (the programs compiled side by side before a signature's
    first call: backward._compile_programs). Δ = rowsum(dO∘O) − dlse first; under GQA the
    per-query-head dK/dV are summed over each group (deterministic). `block_dim`: the blocks'
    head dim where it is not D (the programs' DB: columns past D read as 0)."""
    B, H, Nq, D = q.shape
    Hkv, Nk = k.shape[1], k.shape[2]
    if gpu.is_torch_tensor(q):
        torch = gpu.torch_module()
        q, k, v, o, do = (contiguous_aligned(x) for x in (q, k, v, o, do))
        lse = lse.contiguous().float()
        dlse = zeros_scratch(lse, B * H * Nq) if dlse is None else \
            dlse.float().expand(B, H, Nq).contiguous()
        dq = torch.zeros_like(q)
        dk_h = torch.zeros(B, H, Nk, D, dtype=k.dtype, device=k.device)
        dv_h = torch.zeros_like(dk_h)

        from .attention import _as_jit, _chip_for_blocks
        chip = _chip_for_blocks(q)
        # The dQ program's key block no larger than the dense one's on sm_90a (at d256 its
        # S and dP beside the 64×256 accumulator spill less on fewer keys).
        W = block_dim or D                      # the blocks' head dim: the tables'
        dq_bn = dense.FAST_DQ_BLOCKS_SM90.get(W, (0, None))[1] if chip == "sm_90a" else None

        def programs(launch, side=None):
            delta = delta_cuda(o, do, dlse, launch=launch, block_dim=block_dim)
            run(q, k, v, lse, do, delta, dq, dk_h, dv_h, bm, scale, score_mod, mask_mod,
                block_m, block_n, launch=launch, dq_block_n=dq_bn, block_dim=block_dim)
        _compile_programs(chip, programs, (
            "block mask", q.dtype, D, block_dim, block_m, block_n, dq_bn, bm.BLOCK_M,
            bm.BLOCK_N, _as_jit(score_mod, "score_mod"), _as_jit(mask_mod, "mask_mod"),
            W in dense.SPLIT_KEYROWS, dense.KEYROWS_DK_BLOCK_M.get(W)))
        programs(_launch)
        return _sum_groups(dq, dk_h, dv_h, H, Hkv, k, v)
    q, k, v, o, do = (np.ascontiguousarray(x) for x in (q, k, v, o, do))
    lse = np.ascontiguousarray(lse, dtype=np.float32)
    delta = (_host_f32(o) * _host_f32(do)).sum(-1)
    if dlse is not None:
        delta = (delta - dlse).astype(np.float32)
    dq = np.zeros_like(q)
    dk_h = np.zeros((B, H, Nk, D), k.dtype)
    dv_h = np.zeros_like(dk_h)
    run(q, k, v, lse, do, delta, dq, dk_h, dv_h, bm, scale, score_mod, mask_mod, block_m,
        block_n, block_dim=block_dim)
    return _sum_groups(dq, dk_h, dv_h, H, Hkv, k, v)


def _sum_groups(dq, dk_h, dv_h, H, Hkv, k, v):
    """(dq, dk, dv) with the per-query-head dK/dV summed over each GQA group (float32)."""
    if H == Hkv:
        return dq, dk_h, dv_h
    B, _, Nk, D = dk_h.shape
    group = (B, Hkv, H // Hkv, Nk, D)
    if gpu.is_torch_tensor(dq):
        return dq, dk_h.view(group).float().sum(2).to(k.dtype), \
            dv_h.view(group).float().sum(2).to(v.dtype)
    return dq, _host_as(_host_f32(dk_h.reshape(group)).sum(2), k.dtype), \
        _host_as(_host_f32(dv_h.reshape(group)).sum(2), v.dtype)


def _host_f32(x):
    """float32 values of a host array (bf16 arrays are uint16 bit patterns, not numbers)."""
    return from_bf16(x) if x.dtype == np.uint16 else x.astype(np.float32)


def _host_as(x32, dtype):
    """float32 values as a host array of `dtype` (uint16: bf16 bit patterns, rounded)."""
    return to_bf16(x32) if dtype == np.uint16 else x32.astype(dtype)
