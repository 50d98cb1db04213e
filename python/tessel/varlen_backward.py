"""attention_varlen's gradients: packed sequences trained as FlashAttention's varlen API is.

The forward is attention_varlen's own kernel. The backward has two routes, with the same
gradients as a backward per sequence:

- the varlen programs (varlen_bwd_dkdv, varlen_bwd_dq): the dense backward's key-rows and dQ
  programs over each sequence's own rows, found from cu_seqlens as the forward finds them,
  the queries' indices bottom-right aligned so that causal, the window and ALiBi are index
  arithmetic (_native_backward: torch CPU tensors, and CUDA where NATIVE_CHIPS says);
- elsewhere the dense backward of one long sequence — q as [1, H, total_q, D], k and v as
  [1, Hkv, total_k, D], views of the packed tensors — under a mask that keeps each query to the
  keys of its own sequence: the rows' sequence ids and positions are captured int32 tensors
  that the mask reads, and a block mask made from the same tables lets the programs visit
  only the blocks inside the sequences (attention_backward's block_mask).

Rows past the last sequence (cu_seqlens[-1] < total) get zero gradients and are never read.
docs/dev/serving.md.
"""
import numpy as np

from . import cpu_tensors
from . import gpu
from . import language as tl
from . import serving_checks
from .backward import dq_key_loop, dq_query_block, keyrows_key_block, keyrows_query_loop
from .jit import jit
from .layouts import seq_rows_desc
from .serving_kernels import key_span, sequence_span, varlen_program

_function = None


@jit
def sequence_views(q, k, v, do, lse_in, delta, cu_q, cu_k, B, total_q, total_k, H, HKV, bh,
                   D: tl.constexpr, Q_RS: tl.constexpr, Q_HS: tl.constexpr, K_RS: tl.constexpr,
                   K_HS: tl.constexpr, V_RS: tl.constexpr, V_HS: tl.constexpr,
                   DO_RS: tl.constexpr, DO_HS: tl.constexpr, DV: tl.constexpr = 0,
                   USED_K: tl.constexpr = False):
    """What the varlen programs read for grid row bh (sequence b, query head h): (b, h, its
    first query row q0, nq, k0, nk, and the descriptors of the sequence's rows of q, k, v, dO,
    the LSE and Δ). DV: v's and dO's head dim where it is not D. USED_K: cu_k ends with
    seqused_k (serving_kernels.key_span)."""
    DVV = D if DV == 0 else DV
    b = bh // H
    h = bh % H
    kv_h = h // (H // HKV)
    q0, q_end = sequence_span(cu_q, b, B, total_q)
    k0, k_end = key_span(cu_k, b, B, total_k, USED_K)
    nq = tl.maximum(q_end - q0, 0)
    nk = tl.maximum(k_end - k0, 0)
    qd = seq_rows_desc(q, nq, D, q0, total_q, h, Q_RS, Q_HS)
    kd = seq_rows_desc(k, nk, D, k0, total_k, kv_h, K_RS, K_HS)
    vd = seq_rows_desc(v, nk, DVV, k0, total_k, kv_h, V_RS, V_HS)
    dod = seq_rows_desc(do, nq, DVV, q0, total_q, h, DO_RS, DO_HS)
    ld = tl.make_desc(lse_in, shape=(nq,), strides=(1,), offset=h * total_q + q0)
    dd = tl.make_desc(delta, shape=(nq,), strides=(1,), offset=h * total_q + q0)
    return b, h, q0, nq, k0, nk, qd, kd, vd, dod, ld, dd


@jit
def varlen_bwd_dkdv(q, k, v, do, lse_in, delta, dk, dv, cu_q, cu_k, B, total_q, total_k, H,
                    HKV, OUT_HEADS, max_nk, scale, tiles, n_tiles, D: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
                    SCORE_MOD: tl.constexpr, MASK_MOD: tl.constexpr, Q_RS: tl.constexpr = 0,
                    Q_HS: tl.constexpr = 0, K_RS: tl.constexpr = 0, K_HS: tl.constexpr = 0,
                    V_RS: tl.constexpr = 0, V_HS: tl.constexpr = 0, DO_RS: tl.constexpr = 0,
                    DO_HS: tl.constexpr = 0, DK_RS: tl.constexpr = 0, DK_HS: tl.constexpr = 0,
                    DV_RS: tl.constexpr = 0, DV_HS: tl.constexpr = 0, PART: tl.constexpr = 0,
                    DB: tl.constexpr = 0, TILES: tl.constexpr = False, DV: tl.constexpr = 0,
                    USED_K: tl.constexpr = False):
    """dK and dV of one key block of packed sequence b for one query head: the key-rows
    program (backward.attention_bwd_dkdv_keyrows) over the sequence's own rows — q, k, v, dO,
    dk and dv seen as [1, heads, total, D] (layouts.seq_rows_desc), the LSE and Δ [1, H,
    total] — with the queries' indices bottom-right aligned (i + nk − nq, as varlen_kernel's)
    for causal and the mods, which see b as the sequence. Grid (⌈max_nk/BLOCK_N⌉, B·H); a key
    block past its sequence's keys runs no query block. OUT_HEADS, PART, DB: the key-rows
    program's. TILES: the grid of the batch's key blocks (serving_kernels.varlen_program). DV:
    v's, dO's and dv's head dim where it is not D (the key-rows program's). USED_K: cu_k ends
    with seqused_k (serving_kernels.key_span): keys past a sequence's count get no gradient."""
    W = D if DB == 0 else DB
    b, h, pid_n = varlen_program(cu_k, tiles, B, H, max_nk, n_tiles, BLOCK_N, TILES)
    b, h, q0, nq, k0, nk, qd, kd, vd, dod, ld, dd = sequence_views(
        q, k, v, do, lse_in, delta, cu_q, cu_k, B, total_q, total_k, H, HKV, b * H + h, D, Q_RS,
        Q_HS, K_RS, K_HS, V_RS, V_HS, DO_RS, DO_HS, DV, USED_K)
    out_h = h * OUT_HEADS // H
    dkd = seq_rows_desc(dk, nk, D, k0, total_k, out_h, DK_RS, DK_HS)
    dvd = seq_rows_desc(dv, nk, D if DV == 0 else DV, k0, total_k, out_h, DV_RS, DV_HS)
    n0 = pid_n * BLOCK_N
    kt, vt, kv_idx, dk_acc, dv_acc = keyrows_key_block(kd, vd, n0, W, BLOCK_M, BLOCK_N, PART,
                                                       DV)
    q_stop = nq * tl.minimum(tl.maximum(nk - n0, 0), 1)
    # Without causal and mods no bounds mask: rows past the sequence read as zeros (Q, dO,
    # LSE, Δ) and add exact zeros, as in the key-rows program.
    keyrows_query_loop(qd, dod, ld, dd, dkd, dvd, None, None, kt, vt, kt, kt, kv_idx, dk_acc,
                       dv_acc, n0, q_stop, nk, nk, nk - nq, b, h, scale, D, W, BLOCK_M, BLOCK_N,
                       CAUSAL, SCORE_MOD, MASK_MOD, PART, 0,
                       not CAUSAL and SCORE_MOD is None and MASK_MOD is None, DV)


@jit
def varlen_bwd_dq(q, k, v, do, lse_in, delta, dq, cu_q, cu_k, B, total_q, total_k, H, HKV,
                  max_nq, scale, tiles, n_tiles, D: tl.constexpr, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, SCORE_MOD: tl.constexpr,
                  MASK_MOD: tl.constexpr,
                  Q_RS: tl.constexpr = 0, Q_HS: tl.constexpr = 0, K_RS: tl.constexpr = 0,
                  K_HS: tl.constexpr = 0, V_RS: tl.constexpr = 0, V_HS: tl.constexpr = 0,
                  DO_RS: tl.constexpr = 0, DO_HS: tl.constexpr = 0, DQ_RS: tl.constexpr = 0,
                  DQ_HS: tl.constexpr = 0, DB: tl.constexpr = 0, TILES: tl.constexpr = False,
                  DV: tl.constexpr = 0, USED_K: tl.constexpr = False):
    """dQ of one query block of packed sequence b: the dQ program (backward.attention_bwd_dq)
    over the sequence's rows, as varlen_bwd_dkdv. Grid (⌈max_nq/BLOCK_M⌉, B·H), causal from
    the last query block; a query block past its sequence's queries runs no key block. TILES:
    the grid of the batch's query blocks (serving_kernels.varlen_program). DV, USED_K: as
    varlen_bwd_dkdv's."""
    W = D if DB == 0 else DB
    b, h, pid_m = varlen_program(cu_q, tiles, B, H, max_nq, n_tiles, BLOCK_M, TILES, CAUSAL)
    b, h, q0, nq, k0, nk, qd, kd, vd, dod, ld, dd = sequence_views(
        q, k, v, do, lse_in, delta, cu_q, cu_k, B, total_q, total_k, H, HKV, b * H + h, D, Q_RS,
        Q_HS, K_RS, K_HS, V_RS, V_HS, DO_RS, DO_HS, DV, USED_K)
    dqd = seq_rows_desc(dq, nq, D, q0, total_q, h, DQ_RS, DQ_HS)
    m0 = pid_m * BLOCK_M
    qt, dot_, lse2, dlt, q_idx = dq_query_block(qd, dod, ld, dd, m0, W, BLOCK_M, BLOCK_N, DV)
    k_stop = nk * tl.minimum(tl.maximum(nq - m0, 0), 1)
    dq_key_loop(qt, dot_, lse2, dlt, q_idx + (nk - nq), kd, vd, dqd, m0, k_stop, nk, b, h, scale,
                W, BLOCK_M, BLOCK_N, CAUSAL, SCORE_MOD, MASK_MOD, False, DV)


def attention_varlen_with_grad(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                               return_lse, options, seqused_k=None):
    """attention_varlen on torch tensors (CPU or CUDA) that require grad: o (and lse) with a
    grad_fn. options: attention_varlen's keyword arguments but return_lse and seqused_k."""
    o, lse = _autograd_function().apply(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k,
                                        (max_seqlen_q, max_seqlen_k, options))
    return (o, lse) if return_lse else o


def _autograd_function():
    global _function
    if _function is not None:
        return _function
    torch = gpu.torch_module()

    class TesselVarlen(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, cu_q, cu_k, used, config):
            from .serving import attention_varlen
            max_q, max_k, options = config
            o, lse = attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k, return_lse=True,
                                      seqused_k=used, **options)
            ctx.save_for_backward(q, k, v, o, lse, cu_q, cu_k, used)
            ctx.options = options
            ctx.max_lens = (max_q, max_k)
            ctx.set_materialize_grads(False)
            return o, lse

        @staticmethod
        def backward(ctx, do, dlse):
            q, k, v, o, lse, cu_q, cu_k, used = ctx.saved_tensors
            dq, dk, dv = packed_backward(q, k, v, o, lse, do, dlse, cu_q, cu_k, *ctx.max_lens,
                                         seqused_k=used, **ctx.options)
            return dq, dk, dv, None, None, None, None

    _function = TesselVarlen
    return _function


def packed_backward(q, k, v, o, lse, do, dlse, cu_q, cu_k, max_q, max_k, causal=False,
                    scale=None, window_size=None, softcap=None, alibi_slopes=None, block_m=None,
                    block_n=None, seqused_k=None):
    """(dq, dk, dv) of attention_varlen's o and lse (torch tensors, CPU or CUDA), packed like
    q, k and v: by the varlen programs where _native_backward takes the call, else by the
    dense backward over the packed rows. max_q, max_k: attention_varlen's max_seqlen_q and
    max_seqlen_k. block_m and block_n are the forward's blocks, not the backward programs'
    (theirs are their own defaults). seqused_k: attention_varlen's (the keys after a
    sequence's count get zero gradients)."""
    torch = gpu.torch_module()
    if do is None:                                 # only the LSE has a gradient
        do = torch.zeros_like(o)
    native = _native_backward(q.detach(), k.detach(), v.detach(), o, lse, do, dlse, cu_q, cu_k,
                              max_q, max_k, causal, scale, window_size, softcap, alibi_slopes,
                              seqused_k)
    if native is not None:
        return native
    from .backward import attention_backward
    dq, dk, dv = (torch.zeros_like(x) for x in (q, k, v))
    nq, nk = int(cu_q[-1]), int(cu_k[-1])          # the rows inside sequences
    if nq == 0 or nk == 0:
        return dq, dk, dv

    def rows(x, n):                                # [n, heads, D] -> [1, heads, n, D], a view
        return x[:n].transpose(0, 1).unsqueeze(0)
    tables = _row_tables(cu_q, cu_k, nq, nk, seqused_k)
    score_mod, mask_mod = packed_mods(tables, causal, window_size, softcap, alibi_slopes)
    qd = rows(q.detach(), nq)
    bm = packed_block_mask(mask_mod, tables, nq, nk, causal, window_size,
                           64 if cpu_tensors.is_cpu_tensor(q) else 128)
    grads = attention_backward(
        qd, rows(k.detach(), nk), rows(v.detach(), nk), rows(o, nq), lse[:, :nq].unsqueeze(0),
        rows(do, nq), scale=scale, score_mod=score_mod, mask_mod=mask_mod,
        enable_gqa=q.shape[1] != k.shape[1],
        dlse=None if dlse is None else dlse[:, :nq].unsqueeze(0), block_mask=bm)
    for full, g, n in zip((dq, dk, dv), grads, (nq, nk, nk)):
        full[:n] = g[0].transpose(0, 1)
    return dq, dk, dv


# The chips on which attention_varlen's CUDA gradients run the varlen programs (varlen_bwd_dkdv,
# varlen_bwd_dq: each sequence's own blocks, bottom-right causal and FlashAttention's
# window, soft cap and ALiBi by index arithmetic, as varlen_kernel), where the fast backward
# takes the head dim; elsewhere the dense backward over the packed rows under the
# per-sequence mask (packed_mods) and its block mask. Torch CPU tensors always take them (on
# the interpreter). sm_90a since its GPU check (H100, 2026-12-07: test_serving_gpu.py
# `test_varlen_programs_backward` 30/30 at d64-d256 against float64; forward + backward
# 1.16-1.53x the dense route at d128 and d96: docs/bench/2026-12-07-h100-s46.md). sm_80's code
# has not run.
NATIVE_CHIPS = ("sm_90a",)

# Whether CUDA calls with FlashAttention's window_size, softcap or alibi_slopes take the varlen
# programs too (their mods are the forward's, GPU-checked there and in the dense backward): on
# since test_serving_gpu.py `test_varlen_programs_backward_with_flash_arguments` passed on an
# H100 (2/2) and the CUDA fuzzer's varlen_backward cases with it (forty-seventh session,
# bench/results/2026-12-07-s47/out). Some of those programs spill (up to 1,344 bytes with the
# scale fold given up), as the dense route's block-sparse dK/dV program did (564-1,252).
NATIVE_FLASH_MODS = True

# The varlen programs' compact grid (the batch's blocks, each program's sequence from a map:
# serving_checks.VARLEN_TILES, the forward's), where it launches fewer programs: on the
# interpreter, and on CUDA since its GPU check (H100, forty-ninth session:
# `test_varlen_programs_backward` 42/42 on both grids; forward + backward of one 16k sequence
# beside 63 of 1-512 tokens 1.19x / 1.36x non-causal / causal, 64 of 1-8k 0.96-1.14x over three
# runs: docs/bench/2026-12-07-h100-s49.md).
TILES = True
TILES_CUDA = True

# Whether attention_varlen with gradients runs a v narrower than q at its own width (the varlen
# kernel's DV forward, the varlen programs' DV: dP and dV at v's width; MLA training on packed
# sequences) instead of padding v for the whole call: on the interpreter (torch CPU tensors),
# and on CUDA since its GPU check (H100, fifty-first session: test_serving_gpu.py
# `test_varlen_value_head_dim_gradients` 8/8; forward + backward of 64 packed sequences of
# 0.1-8k beside the padded call, 192/128 1.34x / 1.14x, 128/64 1.27x / 1.14x non-causal /
# causal: docs/bench/2026-12-07-h100-s51.md).
VALUE_HEAD_DIM = True
VALUE_HEAD_DIM_CUDA = True


def takes_value_dim(q, k, v, window_size, softcap, alibi_slopes):
    """Whether attention_varlen with gradients keeps this v narrower than q at its own width
    (VALUE_HEAD_DIM, VALUE_HEAD_DIM_CUDA): CPU tensors, or CUDA on a NATIVE_CHIPS chip with
    v's head dim one of backward.VALUE_HEAD_DIMS where the varlen kernel's DV takes the call
    (attention.dv_kernel_takes), without FlashAttention's mods (their DV programs have run on
    the interpreter only)."""
    if v.shape[-1] >= q.shape[-1]:
        return False
    if cpu_tensors.is_cpu_tensor(q):
        return VALUE_HEAD_DIM
    from .attention import _chip_for_blocks, dv_kernel_takes
    from .backward import VALUE_HEAD_DIMS
    return VALUE_HEAD_DIM_CUDA and _chip_for_blocks(q) in NATIVE_CHIPS and \
        v.shape[-1] in VALUE_HEAD_DIMS and window_size is None and softcap is None and \
        alibi_slopes is None and dv_kernel_takes(q, k, v, serving_checks.VARLEN_FAST_HEAD_DIMS,
                                                 serving_checks.VARLEN_NATIVE_HEAD_DIMS,
                                                 with_grad=True)


# The varlen programs' blocks on the interpreter: small, so that tests of short sequences
# cross blocks.
_HOST_BLOCKS = (16, 16)


def _native_backward(q, k, v, o, lse, do, dlse, cu_q, cu_k, max_q, max_k, causal, scale,
                     window_size, softcap, alibi_slopes, seqused_k=None):
    """(dq, dk, dv) by the varlen programs, or None where they do not take the call: CUDA on a
    chip outside NATIVE_CHIPS, a head dim or dtype the fast backward does not take (or pads
    by copies), v of its own head dim but where takes_value_dim keeps it, tensors past 2³¹
    elements (i32 offsets)."""
    torch = gpu.torch_module()
    total_q, H, D = q.shape
    total_k, Hkv = k.shape[:2]
    B = cu_q.shape[0] - 1
    Ev = v.shape[-1]
    if (Ev != D and not takes_value_dim(q, k, v, window_size, softcap, alibi_slopes)) or \
            min(total_q, total_k, B, H) == 0:
        return None
    from .attention import softmax_scale
    from .serving import _position_mods
    scale = softmax_scale(scale, D)
    cpu = cpu_tensors.is_cpu_tensor(q)
    mods = _position_mods("attention_varlen", causal, window_size, softcap,
                          cpu_tensors.to_numpy(alibi_slopes) if cpu else alibi_slopes,
                          cpu_tensors.to_numpy(q) if cpu else q, (B, H))
    cx = dict(D=D, BLOCK_M=_HOST_BLOCKS[0], BLOCK_N=_HOST_BLOCKS[1], CAUSAL=bool(causal),
              SCORE_MOD=mods.get("SCORE_MOD"), MASK_MOD=mods.get("MASK_MOD"),
              **({"DV": Ev} if Ev != D else {}))
    # The programs read cu_k followed by the key counts (USED_K); the grids read cu_k alone.
    bounds = cu_k if seqused_k is None else torch.cat([cu_k, seqused_k])
    used = {} if seqused_k is None else {"USED_K": True}
    if cpu:
        return _host_programs(q, k, v, o, lse, do, dlse, cu_q, cu_k, bounds, max_q, max_k,
                              scale, dict(cx, **used))
    from . import backward as bw
    from .attention import _chip_for_blocks
    chip = _chip_for_blocks(q)
    views = [x.transpose(0, 1).unsqueeze(0) for x in (q, k, v, o, do)]
    if chip not in NATIVE_CHIPS or max(x.numel() for x in views) >= 2**31 or \
            (mods and not NATIVE_FLASH_MODS):
        return None
    padded = bw.backward_block_dim(*views, cx["MASK_MOD"])
    if padded and not padded[1]:
        return None
    fast = bw._fast_backward_config(*views[:3], causal, scale, cx["SCORE_MOD"], cx["MASK_MOD"],
                                    H != Hkv, None, None, padded[0] if padded else 0,
                                    value_dim=Ev != D)
    if fast is None:
        return None
    shapes, _, cx = fast
    W = cx.get("DB") or D
    dq_cx = bw._with_blocks(cx, bw.FAST_DQ_BLOCKS_SM90.get(W) if chip == "sm_90a" else None)
    kr_cx = bw._with_blocks(cx, bw.FAST_KEYROWS_BLOCKS_SM90.get(W) if chip == "sm_90a" else None)
    parts = [(part, {n: x for n, x in c.items() if n != "EVEN"})
             for part, c in bw.keyrows_launches(shapes, kr_cx, dq_cx)]
    qv, kv_, vv, ov, dov = (bw.in_place(x) for x in views)
    gqa = H != Hkv
    # Zeros where the programs write: the rows past the last sequence are never written. Under
    # GQA the group sums fill dk and dv whole.
    dq = torch.zeros_like(q)
    dk, dv = ((torch.empty_like if gqa else torch.zeros_like)(x) for x in (k, v))
    # GQA: one dK/dV block per query head, summed over each group after.
    dk_h, dv_h = ((q.new_zeros(1, H, total_k, w) for w in (D, Ev)) if gqa else
                  (x.transpose(0, 1).unsqueeze(0) for x in (dk, dv)))
    dqv = dq.transpose(0, 1).unsqueeze(0)
    lse3 = lse.float().contiguous().unsqueeze(0)
    dlse3 = bw.zeros_scratch(lse, H * total_q) if dlse is None else \
        dlse.float().expand(H, total_q).contiguous().unsqueeze(0)
    lay = bw.layout_constexprs(Q=qv, K=kv_, V=vv, DO=dov)
    seq = (cu_q, bounds, B, total_q, total_k, H, Hkv)
    dq_grid = _grid("cuda", cu_q, B, total_q, max_q, dq_cx["BLOCK_M"], H)
    kr_grids = [_grid("cuda", cu_k, B, total_k, max_k, c["BLOCK_N"], H) for _, c in parts]

    def programs(launch, side=None):
        delta = bw.delta_cuda(ov, dov, dlse3, launch=launch, block_dim=cx.get("DB", 0))
        launch(varlen_bwd_dq, dq_grid[0], qv, kv_, vv, dov, lse3, delta, dqv, *seq, max_q, scale,
               *dq_grid[1], **dq_cx, **lay, **bw.layout_constexprs(DQ=dqv), **dq_grid[2], **used)
        for (part, c), (grid, tiles, tx) in zip(parts, kr_grids):
            launch(_keyrows_program(chip, W), grid, qv, kv_, vv, dov, lse3, delta, dk_h, dv_h,
                   *seq, dk_h.shape[1], max_k, scale, *tiles, **c, **lay,
                   **bw.layout_constexprs(DK=dk_h, DV=dv_h), **({"PART": part} if part else {}),
                   **tx, **used)
    bw._compile_programs(chip, programs, ("varlen", q.dtype, bw._hashable(cx), tuple(lay.items()),
                                          bw._hashable(parts), gqa, bool(dq_grid[2]),
                                          tuple(bool(g[2]) for g in kr_grids), bool(used)))
    programs(bw._launch)
    if gqa:
        for full, part in ((dk, dk_h), (dv, dv_h)):
            full.copy_(part[0].view(Hkv, H // Hkv, total_k, -1).sum(1).transpose(0, 1))
    return dq, dk, dv


def _grid(kind, cu, B, total, max_n, block, H):
    """serving_checks.varlen_grid with the backward's switch (TILES / TILES_CUDA)."""
    return serving_checks.varlen_grid(kind, cu, B, total, max_n, block, H,
                                      on=TILES_CUDA if kind == "cuda" else TILES)


def _keyrows_program(chip, D):
    """varlen_bwd_dkdv with the key-rows program's occupancy allowance on `chip` at head dim D
    (backward.KEYROWS_OCCUPANCY_SPILL)."""
    from .backward import KEYROWS_OCCUPANCY_SPILL
    spill = KEYROWS_OCCUPANCY_SPILL.get((chip, D))
    return varlen_bwd_dkdv.with_options(occupancy_spill_bytes=spill) if spill else \
        varlen_bwd_dkdv


def _host_programs(q, k, v, o, lse, do, dlse, cu_q, cu_k, bounds, max_q, max_k, scale, cx):
    """_native_backward on torch CPU tensors: the programs on the interpreter over contiguous
    [1, heads, total, D] numpy copies; bounds: what the programs read as cu_k (its own, or with
    the key counts after it)."""
    total_q, H, D = q.shape
    total_k, Hkv = k.shape[:2]
    B = cu_q.shape[0] - 1
    qn, kn, vn, don = (cpu_tensors.to_numpy(x.detach().transpose(0, 1).unsqueeze(0).contiguous())
                       for x in (q, k, v, do))
    delta = (o.detach().float() * do.float()).sum(-1).transpose(0, 1)
    if dlse is not None:
        delta = delta - dlse.float()
    delta = delta.contiguous().unsqueeze(0).numpy()
    lse3 = lse.detach().float().contiguous().unsqueeze(0).numpy()
    dq = np.zeros_like(qn)
    dk, dv = (np.zeros((1, H, total_k, w), qn.dtype) for w in (D, v.shape[-1]))
    seq = (cpu_tensors.to_numpy(cu_q), cpu_tensors.to_numpy(bounds), B, total_q, total_k, H,
           Hkv)
    grid, tiles, tx = _grid("numpy", seq[0], B, total_q, max_q, cx["BLOCK_M"], H)
    varlen_bwd_dq[grid](qn, kn, vn, don, lse3, delta, dq, *seq, max_q, scale, *tiles, **cx, **tx)
    grid, tiles, tx = _grid("numpy", cpu_tensors.to_numpy(cu_k), B, total_k, max_k,
                            cx["BLOCK_N"], H)
    varlen_bwd_dkdv[grid](qn, kn, vn, don, lse3, delta, dk, dv, *seq, H, max_k, scale, *tiles,
                          **cx, **tx)
    back = lambda x: cpu_tensors.to_torch(x)[0].transpose(0, 1)  # noqa: E731
    dk, dv = (cpu_tensors.to_torch(x)[0].view(Hkv, H // Hkv, total_k, -1).float().sum(1)
              .transpose(0, 1).to(k.dtype) for x in (dk, dv))
    return back(dq).contiguous(), dk.contiguous(), dv.contiguous()


def packed_mods(tables, causal, window_size, softcap, alibi_slopes):
    """(score_mod, mask_mod) of the packed sequences whose rows' sequence ids and positions
    are `tables` (_row_tables): a query sees the keys of its own sequence, with causal, the
    window (FlashAttention's (left, right)), the soft cap and ALiBi at the sequence's
    bottom-right aligned positions, as attention_varlen's kernel has them."""
    from .attention import _as_jit
    from .flash_mods import _mask, _score, _softcap, _window
    window, cap = _window(window_size), _softcap(softcap)
    seq_q, pos_q, seq_k, pos_k = tables
    # flash_mods' cap, ALiBi and window at the rows' positions in their sequences; ALiBi
    # per batch reads the query row's sequence as its batch.
    flash_score = None if cap is None and alibi_slopes is None else _as_jit(
        _score(cap, alibi_slopes, alibi_slopes is not None and len(alibi_slopes.shape) == 2,
               False, None), "score_mod")
    window_mask = None if window is None else _as_jit(_mask(window, None), "mask_mod")

    def packed_mask(b, h, q_idx, kv_idx):
        m = seq_q[q_idx] == seq_k[kv_idx]
        i, j = pos_q[q_idx], pos_k[kv_idx]
        if causal:
            m = m & (i >= j)
        if window_mask is not None:
            m = m & window_mask(b, h, i, j)
        return m

    def packed_score(score, b, h, q_idx, kv_idx):
        return flash_score(score, seq_q[q_idx], h, pos_q[q_idx], pos_k[kv_idx])
    return (None if flash_score is None else packed_score), packed_mask


def packed_block_mask(mask_mod, tables, nq, nk, causal, window_size, block):
    """The BlockMask of packed_mods' mask_mod, made from the rows' sequence ids and positions
    by interval arithmetic over each block's rows and keys (O(blocks), where tessel.block_mask
    evaluates the mask at every pair). A block is empty where its rows and keys share no
    sequence (or, one sequence each side, causal or the window hides every pair), full where
    rows and keys lie in one sequence, every pair is allowed and no key is padding (the rule of
    block_state_kernel), partial otherwise: never full or empty where the mask says otherwise (a
    block the window hides only in combination with causal may be called partial: the mask's
    arithmetic for nothing)."""
    torch = gpu.torch_module()
    from .blocksparse import BlockMask, block_lists
    from .flash_mods import _window
    left, right = _window(window_size) or (-1, -1)
    seq_q, pos_q, seq_k, pos_k = (x.to(torch.int64) for x in tables)

    def spans(seq, pos, n):                        # min and max a block, padding left out
        nb = -(-n // block)
        pad = nb * block - n
        seq, pos = (torch.cat([x, x[-1:].expand(pad)]).view(nb, block) for x in (seq, pos))
        return seq.amin(1), seq.amax(1), pos.amin(1), pos.amax(1)
    qs0, qs1, qp0, qp1 = (x[:, None] for x in spans(seq_q, pos_q, nq))
    ks0, ks1, kp0, kp1 = (x[None, :] for x in spans(seq_k, pos_k, nk))
    one = (qs0 == qs1) & (ks0 == ks1) & (qs0 == ks0)
    empty = (qs1 < ks0) | (ks1 < qs0)
    whole = (torch.arange(ks0.shape[1], device=ks0.device) + 1) * block <= nk
    full = one & whole[None, :]
    if causal:
        empty |= one & (qp1 < kp0)
        full &= qp0 >= kp1
    if left >= 0:
        empty |= one & (kp1 < qp0 - left)
        full &= kp0 >= qp1 - left
    if right >= 0:
        empty |= one & (kp0 > qp1 + right)
        full &= kp1 <= qp0 + right
    part = ~empty & ~full
    lists = [tuple(x[None, None] for x in block_lists(m)) for m in (part, full)]
    if cpu_tensors.is_cpu_tensor(seq_q):
        lists = [tuple(x.numpy() for x in lst) for lst in lists]
    return BlockMask(*lists[0], *lists[1], (None, None, nq, nk), block, block, mask_mod)


def _row_tables(cu_q, cu_k, nq, nk, seqused_k=None):
    """int32 sequence ids and positions of the packed rows, torch tensors where the cumulative
    lengths are: query rows bottom-right aligned (position + the sequence's keys − its queries),
    key rows from 0. seqused_k: each sequence's keys are the first that many of its span (the
    query rows aligned to them); the rest get sequence id -1, which no query row has."""
    torch = gpu.torch_module()
    out = []
    for cu, n in ((cu_q, nq), (cu_k, nk)):
        cu = cu.to(torch.int64)
        r = torch.arange(n, device=cu.device)
        seq = torch.searchsorted(cu[1:].contiguous(), r, right=True)
        out.append((seq, r - cu[seq]))
    (seq_q, pos_q), (seq_k, pos_k) = out
    keys = torch.diff(cu_k.to(torch.int64))
    if seqused_k is not None:
        keys = torch.minimum(keys, seqused_k.to(torch.int64).clamp(min=0))
        seq_k = torch.where(pos_k < keys[seq_k], seq_k, -1)
    pos_q = pos_q + (keys - torch.diff(cu_q.to(torch.int64)))[seq_q]
    return [x.to(torch.int32) for x in (seq_q, pos_q, seq_k, pos_k)]

