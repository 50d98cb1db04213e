"""FP8 (e4m3fn) attention: tessel.attention when q, k and v are FP8.

FlashAttention-3's FP8 forward: Q·Kᵀ on e4m3 operands with float32 accumulation, the scores
scaled by descale_q · descale_k · scale, the online softmax in float32, P rounded to e4m3 (it
lies in [0, 1] before the final normalisation), P·V on e4m3 operands, the output multiplied by
descale_v and stored in bf16 (or fp16). Descales follow FlashAttention-3: a number, or a tensor
broadcastable to ``[B, Hkv]`` (one factor per batch and key/value head).

The program is attention.py's key loop (attention_rows: P is converted to V's dtype) with
FP8 loads, the scale read from memory and the output multiplied by descale_v;
numpy arrays (uint8 bit patterns, tessel.to_fp8) run it on the CPU interpreter, CUDA tensors
on sm_90a. wgmma reads FP8 operands K-major only, and V in P·V has the keys along its rows:
the compiler keeps V's blocks transposed in shared memory, the producer warpgroup transposing
them as it copies (docs/dev/fp8.md), as FlashAttention-3 does.
"""

import numpy as np

from . import gpu
from . import grid as _grid
from . import language as tl
from .attention import _as_jit, _check_shapes, _chip_for_blocks, _past_i32, attention_rows, \
    dense_schedule, even_keys, even_keys_allowed, in_chunks, softmax_scale
from .grid import block_and_row, dense_tiles, fold_grid, persistent_programs, short_tiles, \
    tile_block, with_switches
from .jit import jit


@jit
def fp8_attention_tile(q, k, v, o, lse_out, dq, dk, dv, dqb, dqh, dkb, dkh, dvb, dvh, qk_scale,
                       v_scale, nq, nk, H, HKV, pid_m, bh, D: tl.constexpr,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
                       SCORE_MOD: tl.constexpr, MASK_MOD: tl.constexpr, OUT: tl.constexpr,
                       QK_DESCALED: tl.constexpr, EVEN_N: tl.constexpr = False):
    """Query block `pid_m` of batch·head row `bh`: its output and LSE. The scores' factor is
    qk_scale · dq[b, kv_h] · dk[b, kv_h] — qk_scale alone without QK_DESCALED (descale_q and
    descale_k were numbers, folded into it: a moderate float argument keeps the key loop free
    of the branch on the scale's range) — the output's v_scale · dv[b, kv_h]; dqb, dqh, ... are
    the (batch, kv head) element strides of dq, dk, dv (0 where they broadcast)."""
    b = bh // H
    h = bh % H
    kv_h = h // (H // HKV)
    kv = b * HKV + kv_h
    qd = tl.make_desc(q, shape=(nq, D), strides=(D, 1), offset=bh * nq * D)
    kd = tl.make_desc(k, shape=(nk, D), strides=(D, 1), offset=kv * nk * D)
    vd = tl.make_desc(v, shape=(nk, D), strides=(D, 1), offset=kv * nk * D)
    od = tl.make_desc(o, shape=(nq, D), strides=(D, 1), offset=bh * nq * D)
    ld = tl.make_desc(lse_out, shape=(nq,), strides=(1,), offset=bh * nq)
    iq = b * dqb + kv_h * dqh
    ik = b * dkb + kv_h * dkh
    iv = b * dvb + kv_h * dvh
    scale = qk_scale
    if QK_DESCALED:
        scale = qk_scale * tl.load_scalar(tl.make_desc(dq, shape=(iq + 1,), strides=(1,)), (iq,)) \
            * tl.load_scalar(tl.make_desc(dk, shape=(ik + 1,), strides=(1,)), (ik,))
    descale_v = v_scale * tl.load_scalar(tl.make_desc(dv, shape=(iv + 1,), strides=(1,)), (iv,))

    m0 = pid_m * BLOCK_M
    qt = tl.load(qd, (m0, 0), shape=(BLOCK_M, D))
    acc, lse = attention_rows(qt, kd, vd, m0, nk, b, h, scale, D, BLOCK_M, BLOCK_N, CAUSAL,
                              SCORE_MOD, MASK_MOD, EVEN_N)
    tl.store(od, (m0, 0), (acc * descale_v).to(OUT))
    tl.store(ld, (m0,), lse)


@jit
def fp8_attention_kernel(q, k, v, o, lse_out, dq, dk, dv, dqb, dqh, dkb, dkh, dvb, dvh, qk_scale,
                         v_scale, nq, nk, H, HKV,
                         D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         CAUSAL: tl.constexpr, SCORE_MOD: tl.constexpr, MASK_MOD: tl.constexpr,
                         OUT: tl.constexpr, QK_DESCALED: tl.constexpr = True,
                         EVEN_N: tl.constexpr = False):
    pid_m, bh = block_and_row(tl.cdiv(nq, BLOCK_M))
    if CAUSAL:
        pid_m = tl.cdiv(nq, BLOCK_M) - 1 - pid_m   # the longest rows first, as attention_kernel
    fp8_attention_tile(q, k, v, o, lse_out, dq, dk, dv, dqb, dqh, dkb, dkh, dvb, dvh, qk_scale,
                       v_scale, nq, nk, H, HKV, pid_m, bh, D, BLOCK_M, BLOCK_N, CAUSAL, SCORE_MOD,
                       MASK_MOD, OUT, QK_DESCALED, EVEN_N)


@jit
def fp8_persistent_kernel(q, k, v, o, lse_out, dq, dk, dv, dqb, dqh, dkb, dkh, dvb, dvh,
                          qk_scale, v_scale, nq, nk, H, HKV, n_bh, tiles, starts,
                          D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          CAUSAL: tl.constexpr, SCORE_MOD: tl.constexpr, MASK_MOD: tl.constexpr,
                          OUT: tl.constexpr, QK_DESCALED: tl.constexpr = True,
                          EVEN_N: tl.constexpr = False):
    """fp8_attention_kernel on grid.persistent_programs, as attention.persistent_attention_kernel
    is attention_kernel."""
    n_blocks = tl.cdiv(nq, BLOCK_M)
    td, first, end, step = dense_tiles(tiles, starts, n_blocks * n_bh, CAUSAL)
    for t in range(first, end, step):
        pid_m, bh = tile_block(td, t, n_blocks, CAUSAL)
        fp8_attention_tile(q, k, v, o, lse_out, dq, dk, dv, dqb, dqh, dkb, dkh, dvb, dvh,
                           qk_scale, v_scale, nq, nk, H, HKV, pid_m, bh, D, BLOCK_M, BLOCK_N,
                           CAUSAL, SCORE_MOD, MASK_MOD, OUT, QK_DESCALED, EVEN_N)


# The persistent kernel whose producer copies Q too, for short tiles (grid.short_tiles), as
# attention.persistent_kernel chooses for fp16.
_fp8_variants = {}
_fp8_persistent_once = with_switches(fp8_persistent_kernel, {"producer_once": True},
                                     _fp8_variants)


def overlap_switches():
    """{"fp8_overlap": True} where grid.FP8_OVERLAP_GPU asks FP8's consumers overlapped."""
    return {"fp8_overlap": True} if _grid.FP8_OVERLAP_GPU else {}


def persistent_kernel(Nq, Nk, BN, causal):
    """fp8_persistent_kernel, or its variant copying Q from the producer where the tiles visit
    few key blocks (causal rows half of them on average); overlapped where
    grid.FP8_OVERLAP_GPU."""
    blocks = -(-Nk // BN)
    short = short_tiles((blocks + 1) / 2 if causal and Nq >= Nk else blocks)
    # Not grid.schedule_switches: pipelined tiles have no FP8 GPU check yet (test_fp8_gpu.py).
    switches = dict({"producer_once": True} if short else {}, **overlap_switches())
    return with_switches(fp8_persistent_kernel, switches, _fp8_variants)


# sm_90a blocks by head dim. d128: two consumer warpgroups of 64 rows over 128 keys a step, the
# layout of the fp16 kernels without a mask (the FP8 blocks are half the bytes: the same shared
# memory holds twice the keys, a choice left to measure). d256: 64 keys a step (128 would take
# S 64 + O 128 registers a thread: ptxas serializes the wgmmas), whose transposed V rows are 64
# bytes and take wgmma's 64-byte swizzle; with a score_mod or mask_mod 32 keys (32-byte rows),
# as the fp16 d256 kernels with mods: at 64 keys softcap spilled 40-48 bytes after giving up
# the scale fold and the vector stores, at 32 nothing spills (ptxas, CUDA 13.0).
FP8_BLOCKS = {128: (128, 128), 256: (128, 64)}
FP8_BLOCKS_MODS = {256: (128, 32)}
# The head dims FP8 calls take. d256 since test/gpu/test_fp8_gpu.py passed on the H200 with it
# (2026-12-05: 92 passed, d256 at 128x64 and, with mods, 128x32; bench/results/
# 2026-12-05-h200-s26/now3).
FP8_HEAD_DIMS = (128, 256)
FP8_OUT_DTYPES = ("bf16", "f16")


def is_fp8(x):
    """Whether x is FP8 for tessel.attention: a torch float8_e4m3fn tensor, or a numpy uint8
    array (e4m3fn bit patterns)."""
    if isinstance(x, np.ndarray):
        return x.dtype == np.uint8
    return gpu.is_torch_tensor(x) and str(x.dtype) == "torch.float8_e4m3fn"


def _out_name(out_dtype):
    name = "bf16" if out_dtype is None else gpu.dtype_name(out_dtype)
    if name not in FP8_OUT_DTYPES:
        raise TypeError(f"out_dtype of FP8 attention is bfloat16 or float16, not {out_dtype!r}")
    return name


# One float32 1.0 per CUDA device: the descale pointer of a call that gives a number (the number
# goes into qk_scale / v_scale), so that no call copies its numbers to the device.
_ONES = {}


def _is_number(d):
    """Whether a descale is a number (or None: 1): folded into the scales on the host, where a
    tensor is read by the kernel."""
    return d is None or (not gpu.is_torch_tensor(d) and not isinstance(d, np.ndarray) and
                         np.ndim(d) == 0)


def _broadcast(name, d, B, Hkv, like):
    """(d, e): the descale tensor d float32 where like's kernels read it (numpy: contiguous, as
    the interpreter copies its arguments), and e, d seen as [B, Hkv] (stride 0 where it
    broadcasts) — or the ValueError that says it does not broadcast."""
    host = isinstance(like, np.ndarray)
    if host:
        d = np.ascontiguousarray(d, np.float32)
    else:
        d = d.to(device=like.device, dtype=gpu.torch_module().float32)
    try:
        return d, np.broadcast_to(d, (B, Hkv)) if host else d.expand(B, Hkv)
    except (RuntimeError, ValueError):
        raise ValueError(f"{name} of shape {tuple(d.shape)} does not broadcast to "
                         f"[B, Hkv] = [{B}, {Hkv}]") from None


def _descales(B, Hkv, scale, descales, like):
    """The kernels' descale arguments (dq, dk, dv, their six (batch, kv head) element strides,
    qk_scale, v_scale): each descale tensor as given (float32, on like's device) with its
    strides (0 where it broadcasts), each number folded into qk_scale = scale · dq · dk or
    v_scale beside a 1.0 kept per device. No work on the device and no synchronisation: the
    kernel multiplies."""
    host = isinstance(like, np.ndarray)
    torch = None if host else gpu.torch_module()
    ptrs, strides, factors = [], [], []
    for name, d in zip(("descale_q", "descale_k", "descale_v"), descales):
        if _is_number(d):
            factors.append(1.0 if d is None else float(d))
            if host:
                ptrs.append(np.ones(1, np.float32))
            else:
                ones = _ONES.get(like.device)
                if ones is None:
                    ones = _ONES[like.device] = torch.ones(1, dtype=torch.float32,
                                                           device=like.device)
                ptrs.append(ones)
            strides += [0, 0]
            continue
        d, e = _broadcast(name, d, B, Hkv, like)
        factors.append(1.0)
        ptrs.append(d)
        strides += [x // d.itemsize for x in e.strides] if host else list(e.stride())
    return (*ptrs, *map(int, strides), scale * factors[0] * factors[1], factors[2])


def attention(q, k, v, causal, scale, score_mod, mask_mod, enable_gqa, return_lse, block_m,
              block_n, descale_q, descale_k, descale_v, out_dtype):
    """tessel.attention on FP8 q, k, v (attention.py checks the call and hands it here)."""
    host = isinstance(q, np.ndarray)
    for name, x in (("k", k), ("v", v)):
        if not is_fp8(x) or isinstance(x, np.ndarray) != host:
            raise TypeError(f"q is FP8 ({'uint8 bit patterns' if host else q.dtype}), {name} "
                            f"is not: FP8 attention takes q, k and v in e4m3fn")
    if not host and not q.is_cuda:
        raise TypeError(f"q is on {q.device}: FP8 attention runs CUDA tensors on sm_90a and "
                        "numpy arrays (uint8 bit patterns) on the CPU interpreter")
    B, H, Nq, D, Hkv, Nk = _check_shapes(q.shape, k.shape, v.shape, enable_gqa)
    out = _out_name(out_dtype)
    scale = softmax_scale(scale, D)
    if _past_i32(q, k, v):
        # The kernels address elements with 32-bit offsets: chunks of batches or of GQA head
        # groups, as fp16 calls run (attention.in_chunks), each with its descales' slice.
        def run(bq, hq, hk):
            d = [x if _is_number(x) else _broadcast(n, x, B, Hkv, q)[1][bq, hk]
                 for n, x in zip(("descale_q", "descale_k", "descale_v"),
                                 (descale_q, descale_k, descale_v))]
            return attention(q[bq, hq], k[bq, hk], v[bq, hk], causal, scale, None, None,
                             enable_gqa, True, block_m, block_n, *d, out_dtype)
        return in_chunks(q, k, v, score_mod is not None or mask_mod is not None, enable_gqa,
                         return_lse, run)
    if host:
        BM = block_m or min(64, 1 << max(4, (Nq - 1).bit_length()))
        BN = block_n or min(64, 1 << max(4, (Nk - 1).bit_length()))
    else:
        chip = _chip_for_blocks(q)
        if chip != "sm_90a" or D not in FP8_HEAD_DIMS:
            unchecked = (f" (head dim {D} is built but not yet checked on a GPU: "
                         f"tessel.attention_fp8.FP8_HEAD_DIMS += ({D},) runs it)"
                         if chip == "sm_90a" and D in FP8_BLOCKS else "")
            raise NotImplementedError(
                f"FP8 attention runs on sm_90a (wgmma's e4m3 operands) at head dims "
                f"{', '.join(map(str, FP8_HEAD_DIMS))}; this call is {chip}, head dim "
                f"{D}{unchecked}")
        mods = score_mod is not None or mask_mod is not None
        BM, BN = FP8_BLOCKS_MODS[D] if mods and D in FP8_BLOCKS_MODS else FP8_BLOCKS[D]
        BM, BN = block_m or BM, block_n or BN
    if host:
        q, k, v = (np.ascontiguousarray(x) for x in (q, k, v))
        o = np.zeros((B, H, Nq, D), np.uint16 if out == "bf16" else np.float16)
        lse = np.zeros((B, H, Nq), np.float32)
    else:
        torch = gpu.torch_module()
        q, k, v = (x.contiguous() for x in (q, k, v))
        o = torch.empty((B, H, Nq, D), device=q.device,
                        dtype=torch.bfloat16 if out == "bf16" else torch.float16)
        lse = torch.empty((B, H, Nq), dtype=torch.float32, device=q.device)
    descale = _descales(B, Hkv, scale, (descale_q, descale_k, descale_v), q)
    args = (q, k, v, o, lse, *descale, Nq, Nk, H, Hkv)
    constexprs = dict(D=D, BLOCK_M=BM, BLOCK_N=BN, CAUSAL=bool(causal),
                      SCORE_MOD=_as_jit(score_mod, "score_mod"),
                      MASK_MOD=_as_jit(mask_mod, "mask_mod"),
                      OUT=tl.bfloat16 if out == "bf16" else tl.float16,
                      QK_DESCALED=not (_is_number(descale_q) and _is_number(descale_k)),
                      EVEN_N=even_keys(Nk, BN, even_keys_allowed(causal, mask_mod)))
    if Nq and B * H:
        programs = None if host else persistent_programs(q, "sm_90a", BM, BN,
                                                         -(-Nq // BM) * B * H)
        if programs:
            tiles, starts = dense_schedule(q, Nq, Nk, B * H, BM, BN, causal, programs)
            persistent_kernel(Nq, Nk, BN, causal)[(programs, 1, 1)](*args, B * H, tiles, starts,
                                                                 **constexprs)
        else:
            kernel = with_switches(fp8_attention_kernel, overlap_switches(), _fp8_variants)
            kernel[fold_grid(-(-Nq // BM), B * H)](*args, **constexprs)
    return (o, lse) if return_lse else o
