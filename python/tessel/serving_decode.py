"""Split-KV decoding for tessel.attention_with_kvcache: how many splits, and the launch of
splitkv_kernel and splitkv_combine (serving_kernels.py). docs/dev/serving.md ("Split-KV
decoding") has the design.

A decode step has few query rows per sequence (Sq = 1) and a long cache: one program per
(query block, batch, query head) leaves most of the GPU idle and reads each KV head once per
query head. Here the query heads of a KV group share one program (GQA packing: its rows are
heads × positions) and each sequence's keys are cut into `num_splits` chunks, one program each;
the partial outputs (float32) and their LSEs go to a workspace that a second program merges.
"""
import functools
import math

import numpy as np

from . import gpu
from . import language as tl
from .grid import fold_grid
from .serving_kernels import splitkv_combine, splitkv_combine_tile, splitkv_kernel

#: SMs assumed on the interpreter (no device to ask): the H200's, so that the CPU takes the
#: decisions the GPU this project is measured on takes.
DEFAULT_NUM_SMS = 132
#: Programs resident per SM that the heuristic aims to fill (decode is memory-bound: two
#: programs per SM keep more loads in flight than one).
PROGRAMS_PER_SM = 2
#: A split reads at least this many key blocks (else its fixed costs, the q load and the
#: partial's store, are not repaid).
MIN_BLOCKS_PER_SPLIT = 4
#: A cache shorter than this many keys is not split (num_splits=None): one program per
#: (batch, KV head) writes o and lse itself, without the workspace and the combine's launch.
#: With the combine in registers (splitkv_combine_tile), 4 splits of 1k keys measured 1,507
#: GB/s on the H200 against 1,316 unsplit (2026-12-02, seventh session:
#: docs/bench/2026-12-02-h200-decode-pipelined.md); with the combine on the reference lowering
#: the split lost at 1k (479 against 1,177).
MIN_KEYS_TO_SPLIT = 1024
#: At most this many splits (FlashAttention's cap).
MAX_SPLITS = 128
#: The heuristic (num_splits=None) packs and splits when a KV group's query rows, G·Sq, fit in
#: this many rows (one 64-row block of the fast paths); longer query sides take the
#: one-program-per-query-head kernel, whose query blocks already fill the GPU.
MAX_PACKED_ROWS = 64

#: Up to this many splits are merged by splitkv_combine_tile (one [S, D] tile, no loop: in
#: registers on the GPU); more (an explicit num_splits) by splitkv_combine's loop.
MAX_TILE_COMBINE = 64

_I32_MAX = 2**31 - 1
_num_sms_cache = {}


def num_sms(q):
    """The SM count of q's device (torch's device properties, asked once per device), or
    DEFAULT_NUM_SMS for numpy arrays (the interpreter)."""
    if isinstance(q, np.ndarray):
        return DEFAULT_NUM_SMS
    dev = q.get_device()
    if dev not in _num_sms_cache:
        torch = gpu.torch_module()
        _num_sms_cache[dev] = torch.cuda.get_device_properties(dev).multi_processor_count
    return _num_sms_cache[dev]


@functools.lru_cache(maxsize=1024)
def num_splits_heuristic(programs, key_blocks, sms):
    """How many splits of the keys for `programs` programs per split (B · Hkv · query blocks)
    over `key_blocks` blocks of keys, on a GPU of `sms` SMs.

    FlashAttention-2's rule with PROGRAMS_PER_SM programs per SM as the slots of a wave: none
    when the programs already fill 80 % of the slots; otherwise, among the split counts that
    leave each split at least MIN_BLOCKS_PER_SPLIT blocks (at most MAX_SPLITS), and that change
    the blocks per split, the smallest whose wave efficiency (programs · n / slots over its
    ceiling) is within 85 % of the best. E.g. b = 8, 8 KV heads (64 programs) on 132 SMs: 4
    splits (256 programs in 264 slots) once there are 16 key blocks or more."""
    slots = max(1, sms * PROGRAMS_PER_SM)
    if programs <= 0 or programs >= 0.8 * slots:
        return 1
    most = min(MAX_SPLITS, key_blocks // MIN_BLOCKS_PER_SPLIT)
    if most <= 1:
        return 1
    efficiency = {}
    for n in range(1, most + 1):
        if n > 1 and -(-key_blocks // n) == -(-key_blocks // (n - 1)):
            continue                          # the same blocks per split as n - 1
        waves = programs * n / slots
        efficiency[n] = waves / math.ceil(waves)
    best = max(efficiency.values())
    return min(n for n, e in efficiency.items() if e >= 0.85 * best)


def _pack_groups(q, B, Sq, Hkv, G, D):
    """q [B, Sq, H, D] as [B, Hkv, G·Sq, D], contiguous: the rows of a group, heads × positions
    (a copy of q, which is small when Sq is)."""
    if isinstance(q, np.ndarray):
        return np.ascontiguousarray(
            q.reshape(B, Sq, Hkv, G, D).transpose(0, 2, 3, 1, 4))
    return q.unflatten(2, (Hkv, G)).permute(0, 2, 3, 1, 4).contiguous()


def _out_dtype(q):
    if isinstance(q, np.ndarray):
        return {"float16": tl.float16, "uint16": tl.bfloat16, "float32": tl.float32}[str(q.dtype)]
    return tl.DTYPES[gpu.torch_dtype_name(q)]


def _empty(q, shape):
    if isinstance(q, np.ndarray):
        return np.empty(shape, dtype=np.float32)
    return q.new_empty(shape, dtype=gpu.torch_module().float32)


def tile_combine_rows(n_splits):
    """S of splitkv_combine_tile: the power of two >= n_splits (at least 2: a tile of one row
    is not the blocked path's shape)."""
    return max(2, 1 << (n_splits - 1).bit_length())


def combine_block(D, on_gpu):
    """BLOCK_S (splits per load) of splitkv_combine: the GPU runs it on the reference
    lowering, which keeps its float32 tiles in shared memory (as ring attention's
    merge_partial)."""
    if not on_gpu:
        return 16
    return 32 if D <= 64 else 16


def fits_i32(B, Sq, H, D, q_rs, n_splits):
    """Whether the element offsets of q, o and the workspace fit the kernels' i32 arithmetic."""
    return max(B * Sq * max(q_rs, H * D), n_splits * B * Sq * H * D) <= _I32_MAX


def launch(q, q_rs, q_hs, k_cache, v_cache, kv_strides, o, lse, seqlens, table, *, B, Sq, H,
           Hkv, D, page, max_pages, cache_rows, scale, causal, n_splits, block_m, block_n,
           score_mod=None, mask_mod=None, block_dim=0, starts=None, cu_q=None, total_q=None):
    """Runs splitkv_kernel with n_splits splits, then the combine (splitkv_combine_tile up to
    MAX_TILE_COMBINE splits, else splitkv_combine) unless one split can write o and lse itself,
    on attention_with_kvcache's checked arguments: o [B, Sq, H, D] (contiguous, q's dtype) and
    lse [B, H, Sq] float32 are written.

    Returns the same launches as run(q, k_cache, v_cache, o, lse, seqlens, table, starts), for
    other tensors of the same shapes, strides and dtypes: everything but the workspace and the
    launches is decided here once (attention_with_kvcache keeps it per call signature).
    score_mod / mask_mod (ModFunctions, or None): FlashAttention's soft cap and window, which
    read positions only — a program's rows are several query heads, so its mods see the KV
    head as h. block_dim: the kernel's DB (blocks wider than D, read as 0 past it), or 0.
    starts: cache_leftpad (int32 [B]; the kernel's LEFTPAD), or None. cu_q, total_q: q and o
    packed [total_q, H, D] as attention_varlen's, lse [H, total_q], Sq = 1 (at most one query a
    sequence, at row cu_q[b]: the kernels' VARLEN_Q); run then takes cu_q after starts."""
    G = H // Hkv
    R = G * Sq
    varlen = total_q is not None
    pack = Sq > 1 and G > 1
    if Sq == 1:                              # the group's heads: q_hs apart (varlen: of row
        q_b, q_g, QR = q_rs, G * q_hs, q_hs  # cu_q[b], not b)
    elif G == 1:                             # one head's positions: q_rs apart
        q_b, q_g, QR = Sq * q_rs, q_hs, q_rs
    else:                                    # heads × positions: not affine in q, so packed
        q_b, q_g, QR = Hkv * R * D, R * D, D
    direct = n_splits == 1 and (Sq == 1 or G == 1) and not varlen
    if direct and Sq == 1:
        o_s, o_b, o_g, OR, l_s, l_b, l_g = 0, H * D, G * D, D, 0, H, G
    elif direct:
        o_s, o_b, o_g, OR, l_s, l_b, l_g = 0, Sq * H * D, D, H * D, 0, H * Sq, Sq
    else:
        o_s, o_b, o_g, OR = B * Hkv * R * D, Hkv * R * D, R * D, D
        l_s, l_b, l_g = B * Hkv * R, Hkv * R, R
    k_rs, k_hs, v_rs, v_hs = kv_strides
    grid = fold_grid(-(-R // block_m) * n_splits, B * Hkv)
    scalars = (B, Sq, G, cache_rows, Hkv, max_pages, scale, n_splits, q_b, q_g, o_s, o_b, o_g,
               l_s, l_b, l_g)
    cx = dict(QR=QR, OR=OR, k_rs=k_rs, k_hs=k_hs, v_rs=v_rs, v_hs=v_hs, D=D, BLOCK_M=block_m,
              BLOCK_N=block_n, PAGE=page, CAUSAL=bool(causal) and Sq > 1, DIRECT=direct,
              SCORE_MOD=score_mod, MASK_MOD=mask_mod)
    if block_dim:
        cx["DB"] = block_dim
    if starts is not None:
        cx["LEFTPAD"] = True
    if varlen:
        cx["VARLEN_Q"] = True
    split = splitkv_kernel[grid]
    combine_args = (B, Sq, H, Hkv, n_splits)
    if n_splits <= MAX_TILE_COMBINE:
        combine = splitkv_combine_tile[fold_grid(Sq, B * H)]
        combine_cx = dict(D=D, S=tile_combine_rows(n_splits), OUT=_out_dtype(o),
                          **({"VARLEN_Q": True} if varlen else {}))
    else:
        combine = splitkv_combine[fold_grid(Sq, B * H)]
        combine_cx = dict(D=D, BLOCK_S=combine_block(D, not isinstance(q, np.ndarray)),
                          OUT=_out_dtype(o), **({"VARLEN_Q": True} if varlen else {}))

    def run(q, k_cache, v_cache, o, lse, seqlens, table, starts, cu_q=None):
        if not (grid[0] and grid[1]):
            return
        if pack:
            q = _pack_groups(q, B, Sq, Hkv, G, D)
        if direct:
            part, part_lse = o, lse
        else:
            part = _empty(q, (n_splits, B, Hkv, R, D))
            part_lse = _empty(q, (n_splits, B, Hkv, R))
        # Without LEFTPAD (VARLEN_Q) the kernels do not read `starts` (`cu_q`): any int32
        # buffer.
        cu = seqlens if cu_q is None else cu_q
        split(q, k_cache, v_cache, part, part_lse, seqlens, table, *scalars,
              seqlens if starts is None else starts, cu, total_q or 0, **cx)
        if not direct:
            combine(part, part_lse, o, lse, *combine_args, cu, total_q or 0, **combine_cx)

    run(q, k_cache, v_cache, o, lse, seqlens, table, starts, cu_q)
    return run
