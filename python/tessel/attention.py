"""tessel.attention: scaled dot-product attention written in the DSL.

The kernel is written the naive way: for one block of queries, the scores against every key
block, a softmax streamed across the key loop (normalised over the whole row), then the dot with
V. `tile-optimize` turns it into the online-softmax form. score_mod and mask_mod are @tessel.jit
functions traced into the loop body (FlexAttention semantics, applied per block: every index
argument is a tile of the score block's shape).

Layout BHSD: q [B, H, Nq, D], k and v [B, Hkv, Nk, D]; grid (ceil(Nq / BLOCK_M), B·H), folded
by grid.fold_grid when B·H passes CUDA's 65,535 programs along y.

Given CUDA torch tensors, it runs on the GPU (`_attention_cuda`): fp16/bf16 with head dim 64 or
128 take the mma.sync fast path with the block sizes that measured fastest on the H200
(docs/bench/2026-11-29-h200-mma.md: 128×64 at d128, 64×64 at d64); other shapes and float32 fall
back to the reference lowering. The only memory beyond the inputs and the output is the LSE
(B·H·Nq float32), plus copies of inputs that are not contiguous; without return_lse, the LSE goes
to a per-device scratch buffer reused across calls (gpu.scratch_f32: one allocation fewer per call).
"""
import functools
import math
import numbers

import numpy as np

from . import cpu_tensors
from . import flex
from . import gpu
from . import language as tl
from . import torch_ops
from .grid import MAX_GRID_Y, block_and_row, dense_tiles, fold_grid, greedy_schedule, \
    persistent_programs, schedule_switches, short_tiles, tile_block, with_switches
from .jit import jit
from .mod_functions import as_jit as _as_jit
from .layouts import ALIGNED_INPUTS, ATTENTION_LAYOUT, in_place, layout_constexprs, lean_layout, \
    output_like, rows_desc


@jit(options=ALIGNED_INPUTS)
def attention_kernel(q, k, v, o, lse_out, nq, nk, H, HKV, scale,
                     D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     CAUSAL: tl.constexpr, SCORE_MOD: tl.constexpr, MASK_MOD: tl.constexpr,
                     Q_RS: tl.constexpr = 0, Q_HS: tl.constexpr = 0,
                     K_RS: tl.constexpr = 0, K_HS: tl.constexpr = 0,
                     V_RS: tl.constexpr = 0, V_HS: tl.constexpr = 0,
                     O_RS: tl.constexpr = 0, O_HS: tl.constexpr = 0,
                     EVEN_N: tl.constexpr = False, DIAGONAL_FIRST: tl.constexpr = False,
                     TAIL_FIRST: tl.constexpr = False, DV: tl.constexpr = 0,
                     DB: tl.constexpr = 0, ALIGN_END: tl.constexpr = False):
    # The layout of each of q, k, v, o (layouts.py): X_RS = 0, contiguous [B, heads, N, D];
    # else rows X_RS elements apart and heads X_HS apart with batch b's rows after b·N rows
    # (a [B, N, heads, D] tensor seen as [B, heads, N, D], or q of a packed qkv).
    # grid.fold_grid: query blocks on x, b·h rows on y, folded into x past y's 65,535 cap.
    pid_m, bh = block_and_row(tl.cdiv(nq, BLOCK_M))
    if CAUSAL:
        # The last query blocks, which see the most keys, start first: less of a tail when the
        # last wave runs (+5 % at d128 and +10 % at d256 n16k on the H200, 0 at d64).
        pid_m = tl.cdiv(nq, BLOCK_M) - 1 - pid_m
    attention_tile(q, k, v, o, lse_out, nq, nk, H, HKV, scale, pid_m, bh, D, BLOCK_M, BLOCK_N,
                   CAUSAL, SCORE_MOD, MASK_MOD, Q_RS, Q_HS, K_RS, K_HS, V_RS, V_HS, O_RS, O_HS,
                   EVEN_N, DIAGONAL_FIRST, TAIL_FIRST, DV, DB, ALIGN_END)


@jit(options=ALIGNED_INPUTS)
def persistent_attention_kernel(q, k, v, o, lse_out, nq, nk, H, HKV, scale, n_bh, tiles, starts,
                                D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                CAUSAL: tl.constexpr, SCORE_MOD: tl.constexpr,
                                MASK_MOD: tl.constexpr,
                                Q_RS: tl.constexpr = 0, Q_HS: tl.constexpr = 0,
                                K_RS: tl.constexpr = 0, K_HS: tl.constexpr = 0,
                                V_RS: tl.constexpr = 0, V_HS: tl.constexpr = 0,
                                O_RS: tl.constexpr = 0, O_HS: tl.constexpr = 0,
                                EVEN_N: tl.constexpr = False,
                                DIAGONAL_FIRST: tl.constexpr = False,
                                TAIL_FIRST: tl.constexpr = False, DV: tl.constexpr = 0,
                                DB: tl.constexpr = 0, ALIGN_END: tl.constexpr = False):
    """attention_kernel launched on grid.persistent_programs: program p computes the tiles
    tiles[starts[p]:starts[p + 1]] (grid.greedy_schedule), tile bh · n_blocks + i being
    attention_kernel's program (i, bh) (causal: query block n_blocks − 1 − i). Not causal,
    every tile costs the same and the schedule deals them round-robin: the program counts its
    tiles itself instead of reading them (grid.dense_tiles)."""
    n_blocks = tl.cdiv(nq, BLOCK_M)
    td, first, end, step = dense_tiles(tiles, starts, n_blocks * n_bh, CAUSAL)
    for t in range(first, end, step):
        pid_m, bh = tile_block(td, t, n_blocks, CAUSAL)
        attention_tile(q, k, v, o, lse_out, nq, nk, H, HKV, scale, pid_m, bh, D, BLOCK_M,
                       BLOCK_N, CAUSAL, SCORE_MOD, MASK_MOD, Q_RS, Q_HS, K_RS, K_HS, V_RS, V_HS,
                       O_RS, O_HS, EVEN_N, DIAGONAL_FIRST, TAIL_FIRST, DV, DB, ALIGN_END)


@jit
def attention_tile(q, k, v, o, lse_out, nq, nk, H, HKV, scale, pid_m, bh,
                   D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   CAUSAL: tl.constexpr, SCORE_MOD: tl.constexpr, MASK_MOD: tl.constexpr,
                   Q_RS: tl.constexpr, Q_HS: tl.constexpr, K_RS: tl.constexpr,
                   K_HS: tl.constexpr, V_RS: tl.constexpr, V_HS: tl.constexpr,
                   O_RS: tl.constexpr, O_HS: tl.constexpr, EVEN_N: tl.constexpr = False,
                   DIAGONAL_FIRST: tl.constexpr = False, TAIL_FIRST: tl.constexpr = False,
                   DV: tl.constexpr = 0, DB: tl.constexpr = 0, ALIGN_END: tl.constexpr = False):
    """Query block `pid_m` of batch·head row `bh`: its output and LSE. DV: v's and o's head dim
    where it is not D (0: D). DB: the blocks' head dim where it is not D (0: D; with DV 0): q,
    k and v read DB columns wide, those past D as 0, o stored D wide — a head dim the fast
    paths do not take, padded inside the kernel instead of copied (BLOCK_HEAD_DIM_CHIPS).
    ALIGN_END (align_end): the blocks end at the last query row, so that the block cut short
    is the first, whose causal rows see the fewest keys (its rows before 0 are neither read
    nor stored: the loads and stores are bounded below as above)."""
    DO = D if DV == 0 else DV
    W = D if DB == 0 else DB
    b = bh // H
    h = bh % H
    kv_h = h // (H // HKV)                      # grouped-query: heads share a key/value head
    q_rows = bh * nq
    kv_rows = (b * HKV + kv_h) * nk
    qd = rows_desc(q, nq, D, q_rows, b, h, Q_RS, Q_HS)
    kd = rows_desc(k, nk, D, kv_rows, b, kv_h, K_RS, K_HS)
    vd = rows_desc(v, nk, DO, kv_rows, b, kv_h, V_RS, V_HS)
    od = rows_desc(o, nq, DO, q_rows, b, h, O_RS, O_HS)
    ld = tl.make_desc(lse_out, shape=(nq,), strides=(1,), offset=q_rows)

    m0 = pid_m * BLOCK_M
    if ALIGN_END:
        m0 -= tl.cdiv(nq, BLOCK_M) * BLOCK_M - nq
    qt = tl.load(qd, (m0, 0), shape=(BLOCK_M, W))
    acc, lse = attention_rows(qt, kd, vd, m0, nk, b, h, scale, W, BLOCK_M, BLOCK_N, CAUSAL,
                              SCORE_MOD, MASK_MOD, EVEN_N, DIAGONAL_FIRST, TAIL_FIRST, DV)
    tl.store(od, (m0, 0), acc.to(qt.dtype))
    tl.store(ld, (m0,), lse)


@jit
def attention_rows(qt, kd, vd, m0, nk, b, h, scale, D: tl.constexpr, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, SCORE_MOD: tl.constexpr,
                   MASK_MOD: tl.constexpr, EVEN_N: tl.constexpr = False,
                   DIAGONAL_FIRST: tl.constexpr = False, TAIL_FIRST: tl.constexpr = False,
                   DV: tl.constexpr = 0):
    """The key loop of the query block `qt` (rows m0…): its output (normalised) and LSE, the
    scores `scale · qt·kᵀ` with the mods and masks, P in V's dtype for P·V (FP8 too:
    attention_fp8.py). EVEN_N: nk is a multiple of BLOCK_N, so every key block is whole and
    needs no key-tail mask (FlashAttention's Is_even_MN): without another mask the kernel has
    one key loop, not an unmasked and a masked copy (even_keys). DIAGONAL_FIRST (causal,
    BLOCK_M == BLOCK_N, nq <= nk: diagonal_first): FlashAttention-3's order, the block on the
    diagonal first and masked, then the blocks before it unmasked, in one loop whose first
    iteration the overlapped consumers peel (so the masked block is the peel). TAIL_FIRST
    (not causal: tail_first): the same with the last key block, masked at the key tail. DV: v's
    head dim where it is not D (0: D)."""
    DO = D if DV == 0 else DV
    q_idx = tl.broadcast_to((m0 + tl.arange(0, BLOCK_M))[:, None], (BLOCK_M, BLOCK_N))
    acc = tl.zeros((BLOCK_M, DO), tl.float32)
    lse = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    first = m0 if DIAGONAL_FIRST else (nk - 1) // BLOCK_N * BLOCK_N
    for jj in tl.stream(0, m0 + BLOCK_N if DIAGONAL_FIRST else nk, BLOCK_N):
        if DIAGONAL_FIRST or TAIL_FIRST:
            j = tl.where(jj == 0, first, jj - BLOCK_N)
        else:
            j = jj
        kt = tl.load(kd, (j, 0), shape=(BLOCK_N, D))
        s = tl.dot(qt, kt.T) * scale
        kv_idx = tl.broadcast_to((j + tl.arange(0, BLOCK_N))[None, :], (BLOCK_M, BLOCK_N))
        if SCORE_MOD is not None:
            s = SCORE_MOD(s, b, h, q_idx, kv_idx)
        if DIAGONAL_FIRST:
            # Only the first block is cut: keys past the diagonal are past every row that
            # counts (nq <= nk), and the blocks after it are before every row.
            mask = (jj != 0) | (q_idx >= kv_idx)
        elif TAIL_FIRST:
            mask = (jj != 0) | (kv_idx < nk)    # only the last block, run first, has a tail
        elif EVEN_N:
            mask = tl.full((BLOCK_M, BLOCK_N), True, tl.int1)   # folded away
        else:
            mask = kv_idx < nk
        if CAUSAL and not DIAGONAL_FIRST:
            mask = mask & (q_idx >= kv_idx)
        if MASK_MOD is not None:
            mask = mask & MASK_MOD(b, h, q_idx, kv_idx)
        s = tl.where(mask, s, float("-inf"))
        p, lse = tl.softmax(s, axis=1, return_lse=True)   # streamed over j
        vt = tl.load(vd, (j, 0), shape=(BLOCK_N, DO))
        acc += tl.dot(p.to(vt.dtype), vt)
    return acc, lse


# Whether calls take the EVEN_N kernels where they may (False: the general kernel whatever
# the key length, a switch for comparisons; set it before the first call).
EVEN_KEYS = True


def even_keys_allowed(causal, mask_mod):
    """Whether a call may take the EVEN_N kernel where its key length allows (even_keys): the
    key tail must be its only mask. Kernels with another mask keep their masked copy whatever
    the key length is, and are left as they were."""
    return EVEN_KEYS and not causal and mask_mod is None


# Whether causal calls run their diagonal block first where they may (diagonal_first; False:
# the split's masked loop after the unmasked one, a switch for comparisons; set it before the
# first call). H200 (docs/bench/2026-12-05-h200-even-keys-diagonal.md): d128 4k causal +4 %,
# 16k causal even; bits checked against float32.
DIAGONAL_BLOCK_FIRST = True

# Whether non-causal calls without a mask_mod run their last key block first where they may
# (tail_first; False: EVEN_N or the split; set it before the first call): one kernel for every
# key length, the key tail masked in the peel only — a third less code at ragged lengths, but
# off: on the H200 (2026-12-05, ab_gpu_options.py --cases dense ragged) the kernels without it
# ran 1.6–10.5 % faster, whole and ragged lengths alike (docs/bench/2026-12-05-h200-s31.md).
TAIL_BLOCK_FIRST = False

# (head dim, BLOCK_M, BLOCK_N) of the kernels whose overlapped consumers peel the key loop's
# first iteration, so that a masked block run first is the peel (sm_90a d128 128x128; d64
# 128x128, which calls take with block_m=/block_n= only: 24 wgmma instead of 36, 0 spill);
# elsewhere the loop would test for its first block at every block (d64's 64x128 and 192x128,
# where ptxas then spills 32 bytes) or give the overlap up (d256 128x64).
PEELED_BLOCKS = {(128, 128, 128), (64, 128, 128)}


def _peeled(D, block_m, block_n, chip):
    return (D, block_m, block_n) in PEELED_BLOCKS and chip in (None, "sm_90a")


def diagonal_first_allowed(causal, mask_mod, D, block_m, block_n, chip):
    """Whether a causal call may run attention_rows' DIAGONAL_FIRST loop where its lengths
    allow (diagonal_first): one diagonal block a query block (BLOCK_M == BLOCK_N), no
    mask_mod, PEELED_BLOCKS, on sm_90a or the interpreter (chip None)."""
    return DIAGONAL_BLOCK_FIRST and causal and mask_mod is None and block_m == block_n and \
        _peeled(D, block_m, block_n, chip)


def diagonal_first(nq, nk, allowed):
    """attention_rows' DIAGONAL_FIRST: the query rows' diagonal block exists for every query
    block (nq <= nk), where `allowed` (diagonal_first_allowed)."""
    return allowed and nq <= nk


def tail_first(causal, mask_mod, D, block_m, block_n, chip):
    """attention_rows' TAIL_FIRST: a non-causal call without a mask_mod at PEELED_BLOCKS runs
    its last key block first, masked at the key tail, as the peel, then the others unmasked —
    at every key length, so that one kernel serves them all (whole blocks mask nothing in the
    peel) with one loop's code where the split had two."""
    return TAIL_BLOCK_FIRST and not causal and mask_mod is None and \
        _peeled(D, block_m, block_n, chip)


def key_loop_constexprs(nq, nk, D, block_m, block_n, causal, score_mod, mask_mod, chip):
    """attention_rows' EVEN_N, DIAGONAL_FIRST and TAIL_FIRST, attention_tile's ALIGN_END, for a
    call (chip None: the interpreter)."""
    tail = tail_first(causal, mask_mod, D, block_m, block_n, chip)
    diagonal = diagonal_first_allowed(causal, mask_mod, D, block_m, block_n, chip)
    return dict(
        EVEN_N=not tail and even_keys(nk, block_n, even_keys_allowed(causal, mask_mod)),
        DIAGONAL_FIRST=diagonal_first(nq, nk, diagonal),
        TAIL_FIRST=tail,
        ALIGN_END=align_end(nq, nk, block_m, block_n,
                            align_end_allowed(causal, score_mod, mask_mod, diagonal)))


# Whether causal calls whose query length is not a multiple of the query block align their
# blocks to the last row where they may (align_end; False: blocks from row 0, a switch for
# comparisons; set it before the first call).
ALIGN_QUERY_BLOCKS_TO_END = True


def align_end_allowed(causal, score_mod, mask_mod, diagonal):
    """Whether a call may run attention_tile's ALIGN_END where its lengths ask (align_end):
    causal, no score_mod or mask_mod (they would see the rows before 0), and not the
    diagonal-first loop (it needs blocks on the key blocks' grid)."""
    return ALIGN_QUERY_BLOCKS_TO_END and causal and score_mod is None and mask_mod is None \
        and not diagonal


def align_end(nq, nk, block_m, block_n, allowed):
    """attention_tile's ALIGN_END where `allowed` (align_end_allowed): the last query block is
    cut short (nq not a multiple of block_m) and the causal key blocks the tiles visit cost
    less with the blocks ending at the last row (causal_block_cost). Cut short last, that
    block sees the most keys (d64's 192-row blocks at 4,096 queries: 64 rows over every key);
    first, the fewest — but shifted off the key blocks' grid, more blocks straddle the
    diagonal and are masked."""
    return allowed and nq % block_m != 0 and \
        causal_block_cost(nq, nk, block_m, block_n, True) < \
        causal_block_cost(nq, nk, block_m, block_n, False)


@functools.lru_cache(maxsize=256)
def causal_block_cost(nq, nk, block_m, block_n, aligned):
    """The key blocks a causal call's query blocks visit, the masked ones (those the diagonal
    crosses) counted twice; `aligned`: the blocks end at the last row. On an H100 (2026-12-07,
    fp16, aligned / from row 0) the ratio of these costs matched the measured speed-ups: d64
    192x128 at 2k / 4k / 8k / 16k 1.043 / 1.052 / 1.014 / 1.015 predicted, 1.043 / 1.057 /
    1.014 / 1.011 measured; d256 128x64 at 4000 1.000 (0.979), d128 64x64 at 1000 0.910
    (0.980)."""
    first, end = query_block_rows(nq, block_m, aligned)
    visited = -(-np.minimum(np.minimum(end, nq), nk) // block_n)
    masked = np.maximum(visited - np.maximum(first, 0) // block_n, 0)
    return int((visited + masked).sum())


def query_block_rows(nq, block_m, aligned):
    """The rows [first, end) of the query blocks of nq queries, in row order, as
    attention_tile's m0 places them: from row 0 (the last block may end past nq), or
    `aligned` (ALIGN_END) ending at nq (the first may start before 0)."""
    nb = -(-nq // block_m)
    first = np.arange(nb) * block_m - (nb * block_m - nq if aligned else 0)
    return first, first + block_m


def even_keys(nk, block_n, allowed):
    """The kernels' EVEN_N: every key block of `nk` keys is whole, so that the kernel has one
    key loop instead of an unmasked and a masked copy (attention_rows) — a third less code and
    a third less cold compile at d128 — where `allowed` (even_keys_allowed)."""
    return allowed and nk % block_n == 0


def _block(n, cap=64, floor=16):
    return max(floor, min(cap, 1 << max(0, (n - 1).bit_length())))


# (chip, head dim, dtype name) -> (BLOCK_M, BLOCK_N) on the GPU. Both fast paths take 64 or 128
# query rows, head dims 64 and 128, f16/bf16.
# - sm_80 (mma.sync): 128-row blocks as 4 warps of 32 rows (FA2's layout, two m16 tiles per K/V
#   ldmatrix) were the fastest on the H200 at both head dims: +19-24 % over 64-row blocks at
#   d128 and +7 % at d64 (docs/bench/2026-11-29-h200-mma-perf2.md).
# - sm_90a (wgmma, codegen auto): one warpgroup of 64 rows; 64x64 is the best d128 block (three
#   CTAs per SM) and 64x128 the best d64 block (docs/bench/2026-11-29-h200-wgmma.md).
# - d256: Q stays in shared memory (64 registers a thread would not fit beside O's 128).
#   sm_90a: 128x64, two warpgroups (192 KiB): 487-515 TFLOP/s on the H200 against 355-373 at
#   64x64 and 400-434 at 64x32/128x32 (docs/bench/2026-12-02-h200-head-dims.md). sm_80: 64x64
#   (160 KiB of its 163). test/Conversion/TileToMMA/head-dim-256.mlir.
# - d192 natively (NATIVE_HEAD_DIMS): sm_90a 128x64 as d256 (144 KiB; 128x128 needs 240).
GPU_BLOCKS = {("sm_80", 64): (128, 64), ("sm_80", 128): (128, 64), ("sm_80", 256): (64, 64),
              ("sm_90a", 64): (64, 128), ("sm_90a", 128): (64, 64), ("sm_90a", 192): (128, 64),
              ("sm_90a", 256): (128, 64)}
# Where no mask hides keys (not causal, no mask_mod), blocks that differ from the above: on
# sm_90a at d128 two warpgroups of 64 rows over 128 keys a step (K/V blocks shared by twice the
# rows) measured +6 % to +17 % over 64x64 at 1k-32k in fp16 and bf16 on the H200, while causal
# kernels lost up to 17 % with them at short lengths (the diagonal blocks, fewer CTAs)
# (docs/bench/2026-12-02-h200-forward-blocks.md).
GPU_BLOCKS_UNMASKED = {("sm_90a", 128): (128, 128)}
# Causal kernels (no mask_mod) of at least CAUSAL_LONG_KEYS keys that differ from GPU_BLOCKS:
# on sm_90a at d128, 128x128 with a producer warpgroup (GpuOptions(warp_specialize)) measured
# +1 % at 2k keys, +4 % at 4k and +10-15 % at 8k-32k over 64x64 on the H200, and -7 % at 1k
# (docs/bench/2026-12-03-h200-warp-specialize.md). Since then the persistent kernel, Q from the
# producer on short tiles and the diagonal block first turned 1k around: +11 % over 64x64
# (399 against 359 TFLOP/s, 0.96 against 0.87x cuDNN; H100, one process,
# docs/bench/2026-12-06-h100-s38.md), hence 128x128 from 1024 keys.
GPU_BLOCKS_CAUSAL_LONG = {("sm_90a", 128): (128, 128)}
CAUSAL_LONG = 2048
CAUSAL_LONG_KEYS = 1024
# Kernels without score_mod or mask_mod (causal or not) of at least CAUSAL_LONG queries and
# keys that differ from the above: on sm_90a at d64, 192x128 (three consumer warpgroups and a
# producer, persistent: FlashAttention-3's d64 block) measured +13 % at 4k and +18 % at 16k
# non-causal, +2-7 % at 4k and +12 % at 16k causal over 64x128 on the H200, and -3 to -7 % at
# 1k (docs/bench/2026-12-04-h200-d64-three-warpgroups.md). Few queries keep 64x128: a
# 192-row tile of a short query block computes rows that are not there, on one CTA an SM
# where 64x128 runs three.
GPU_BLOCKS_PLAIN_LONG = {("sm_90a", 64): (192, 128)}
# Kernels with a score_mod or mask_mod that differ from GPU_BLOCKS: on sm_90a at d256, 128x64
# spills with any mod (8-20 bytes dense, 28-96 with a block mask) after giving up the TMA
# producer, the scale fold and the overlapped consumers, where 128x32 keeps all three and spills
# nothing (ptxas, CUDA 13.0; test/python/test_spills.py). Plain d256 keeps 128x64 (0 spill),
# which measured 9-15 % ahead of 128x32 there (docs/bench/2026-12-04-h200-backward-bar.md);
# 128x32 with mods against 128x64 is not measured yet. On sm_80 at d128, 128x64 (255 registers:
# 32-row warp tiles with their 128-column O) spilled 24-68 bytes with a mod and 80-252 with a
# block mask, with three stages too; 64x64 (16-row warps, FlashAttention-2's causal block on
# sm86/89) spills nothing and is a shape the H200 has run as sm_80 code
# (check_attention_mma.py); 128x32 spills nothing either but has not run. Not measured on an
# A100 (no session has one).
GPU_BLOCKS_MODS = {("sm_90a", 256): (128, 32), ("sm_80", 128): (64, 64)}
# Kernels (chip, head dim, BLOCK_M, BLOCK_N) whose K/V ring has other than two stages: on sm_80
# at d128, 128x64 spills one register a key block with two stages (12 bytes) and nothing with
# three (ptxas, CUDA 13.0). Its 32-row warps read Q from shared memory, so Q keeps a slot of its
# own: two stages take 96 KiB and three 128, one CTA an SM on an A100 (164 KiB) either way.
GPU_STAGES = {("sm_80", 128, 128, 64): 3}
_FAST_DTYPES = ("f16", "bf16")
# The head dims the fast paths take; fp16/bf16 CUDA calls with another head dim up to 256 run
# at the next of them, q, k and v padded with zero columns (padded_head_dim).
FAST_HEAD_DIMS = (64, 128, 256)
# chip -> head dims its fast path also takes as they are, instead of padded: sm_90a's wgmma
# takes 192 (three 64-column slabs; 0 spill, nothing given up: test_spills.py), three quarters
# of the padded call's work. Forward calls only, without a mask_mod or block_mask (the backward's
# and the block-sparse kernels' programs take 64/128/256: such calls pad as before). On since
# its GPU check (H100, 2026-12-06: test_native_head_dim_192 24/24 against float32; fp16 TFLOP/s
# padded -> native 374 -> 542 at 4k, 267 -> 506 4k causal, 468 -> 533 16k, 411 -> 569 16k
# causal: docs/bench/2026-12-06-h100-s41.md).
NATIVE_HEAD_DIMS = {"sm_90a": (192,)}
# Whether NATIVE_HEAD_DIMS and the DV kernel (VALUE_HEAD_DIM_KERNEL) take inputs that are not
# contiguous ([B, N, H, D] views, read in place). On since its GPU check (H100, 2026-12-06:
# test_python_gpu.py `test_native_strided_views` 12/12; docs/bench/2026-12-06-h100-s42.md).
NATIVE_STRIDED = True
# The chips on which forward calls that padded_head_dim pads (96, 80, 40, 160, ...) run the
# dense kernels with blocks of the padded head dim over q, k and v as they are (the kernels' DB:
# columns past D read as 0 — TMA zero-fills a box past the tensor's columns, cp.async copies
# none — and o stored D wide) instead of copying them padded and cutting o: no gradients wanted
# (the backward pads), no mask_mod or block_mask (their block-sparse kernels have no DB), v of
# q's head dim, D a multiple of 8 (the loads bound columns by 16-byte chunks). As
# attention_varlen's serving_checks.VARLEN_BLOCK_HEAD_DIM (on since its GPU check: 1.08-1.25x
# the copied padding). sm_90a's and sm_80's kernels compile with 0 spill at 96/80/40 -> 128/64
# and 160 -> 256 (test_spills.py). sm_90a since its GPU check (H100, 2026-12-06:
# test_python_gpu.py `test_block_head_dim` 48/48 against float32, 96/96 with trim_zero_columns;
# d96 fp16 TFLOP/s padded -> DB 185 -> 433 at 1k, 355 -> 484 at 4k, 445 -> 476 at 16k, causal
# 263 -> 434 at 4k: docs/bench/2026-12-06-h100-s43.md). sm_80's code has not run.
BLOCK_HEAD_DIM_CHIPS = ("sm_90a",)

# Whether calls with a mask_mod that reads no tensor (window_size's, a prefix-LM's: the dense
# kernel's MASK_MOD, not the block-sparse kernel) take BLOCK_HEAD_DIM_CHIPS' DB too, forward
# and backward (backward.backward_block_dim). The kernels take it as they take a score_mod.
# On since its GPU check (H100, 2026-12-06: test_attention_backward_gpu.py
# `test_block_head_dim_with_masks` 8/8; d96 B4 H16 N8192 fp16 window 165 -> 376 TFLOP/s with
# the sparse switch below, 0.68 -> 1.54x FlexAttention: docs/bench/2026-12-06-h100-s44.md);
# False pads on copies.
BLOCK_HEAD_DIM_MASKS = True


# Whether calls with a block_mask, or a mask_mod that reads tensors (block-sparse at run time:
# blocksparse.auto_block_mask), take BLOCK_HEAD_DIM_CHIPS' DB in the block-sparse kernel
# (columns past D read as 0, o stored D wide, as the dense kernels') instead of running it on
# padded copies; with gradients the block-sparse backward's programs take it too
# (backward.sparse_block_dim, where backward.BLOCK_HEAD_DIM_CHIPS has the chip). On since its
# GPU check (H100, 2026-12-06: test_block_mask_gpu.py `test_block_head_dim_block_sparse*` 22/22
# against float32 and float64 autograd; d96 B4 H16 N8192 fp16 × FlexAttention, copies -> DB:
# document 0.81 -> 1.28, prefix-LM 1.13 -> 1.56, block-sparse 1.64 -> 2.66:
# docs/bench/2026-12-06-h100-s44.md); the interpreter checks the programs in CI
# (test_block_mask.py); False pads on copies.
BLOCK_HEAD_DIM_SPARSE = True


def block_head_dim_sparse(q, v, Dp, chip, grad, mask_mod, block_mask, block_m, block_n):
    """Whether a CUDA call that would be padded to Dp runs the block-sparse kernel with DB = Dp
    instead (BLOCK_HEAD_DIM_SPARSE): a block_mask, or a mask_mod that reads tensors without
    asked-for blocks (the call auto_block_mask makes block-sparse); with gradients wanted
    (`grad`) only where the backward's programs take DB too."""
    if not BLOCK_HEAD_DIM_SPARSE or chip not in BLOCK_HEAD_DIM_CHIPS or \
            not pads_in_kernel(q, v, Dp) or (grad and not _backward_pads_inside(chip)):
        return False
    if block_mask is not None:
        return True
    from .blocksparse import mask_reads_tensors
    return mask_mod is not None and block_m is None and block_n is None and \
        mask_reads_tensors(mask_mod)


def block_head_dim_masked(mask_mod, block_mask):
    """The `masked` of block_head_dim_takes: a block_mask, or a mask_mod that
    BLOCK_HEAD_DIM_MASKS does not let through (one that reads tensors never: its calls are
    block-sparse)."""
    if block_mask is not None:
        return True
    if mask_mod is None:
        return False
    from .blocksparse import mask_reads_tensors
    return not BLOCK_HEAD_DIM_MASKS or mask_reads_tensors(mask_mod)


def pads_in_kernel(q, v, Dp):
    """Whether the kernels' DB can pad q's head dim D to Dp inside the kernel: Dp given, D a
    multiple of 8 (the loads bound a block's columns by 16-byte chunks), v of q's head dim.
    tessel.attention's rule below and attention_varlen's (serving._varlen_block_dim) add their
    switch and the gradient's."""
    return Dp is not None and q.shape[-1] % 8 == 0 and v.shape[-1] == q.shape[-1]


def block_head_dim_takes(q, v, Dp, chip, grad, masked):
    """Whether a CUDA forward call that would be padded to Dp runs the dense kernels with DB = Dp
    instead (BLOCK_HEAD_DIM_CHIPS lists `chip`); with gradients wanted (`grad`) only where the
    backward's programs take DB too (backward.BLOCK_HEAD_DIM_CHIPS)."""
    if grad and not _backward_pads_inside(chip):
        return False
    return chip in BLOCK_HEAD_DIM_CHIPS and not masked and pads_in_kernel(q, v, Dp)


def _backward_pads_inside(chip):
    """Whether the backward's programs take DB on `chip` (backward.BLOCK_HEAD_DIM_CHIPS)."""
    from .backward import BLOCK_HEAD_DIM_CHIPS as backward_chips
    return chip in backward_chips


def padded_head_dim(D, dtype):
    """The head dim a CUDA call of head dim D and dtype name runs at when it is not D, else
    None: fp16/bf16 head dims below 256 that the fast paths do not take run at the next of
    FAST_HEAD_DIMS. Zero columns change neither q·kᵀ nor the first D columns of P·V, so the
    padded call's output, cut back to D columns, is the answer (the scale stays 1/sqrt(D)); it
    costs a copy of q, k and v and the work of the larger head dim, against the reference
    lowering's tens of times slower kernel. FlashAttention-2's wrapper pads the same way."""
    if dtype not in _FAST_DTYPES or D in FAST_HEAD_DIMS or not 0 < D < 256:
        return None
    return next(p for p in FAST_HEAD_DIMS if p > D)


def _cuda_padding(q, k, v):
    """padded_head_dim for tessel.attention's inputs: CUDA tensors of rank 4, one dtype and one
    head dim (anything else goes on and meets the usual checks)."""
    if not all(gpu.is_torch_tensor(x) and x.is_cuda and len(x.shape) == 4 for x in (q, k, v)):
        return None
    if not q.shape[-1] == k.shape[-1] == v.shape[-1] or not q.dtype == k.dtype == v.dtype:
        return None
    return padded_head_dim(q.shape[-1], gpu.torch_dtype_name(q))


def native_head_dim(D, dtype, chip, grad, masked, contiguous=True):
    """Whether a forward call of head dim D, dtype name and chip runs D as it is where
    padded_head_dim would pad it (NATIVE_HEAD_DIMS): not when gradients are wanted (`grad`)
    unless the backward takes D as it is too (backward.NATIVE_BACKWARD_HEAD_DIMS; else it pads),
    nor where a mask_mod or block_mask is given (`masked`: their block-sparse kernels), nor,
    unless NATIVE_STRIDED, for inputs that are not all `contiguous`."""
    if grad:
        from .backward import native_backward
        if not native_backward(D, chip):
            return False
    return dtype in _FAST_DTYPES and not masked and (contiguous or NATIVE_STRIDED) and \
        D in NATIVE_HEAD_DIMS.get(chip, ())


def _pad_columns(x, n):
    """x with zero columns appended up to n: torch's pad for torch tensors (differentiable: the
    gradient is cut back to x's columns), np.pad otherwise."""
    if gpu.is_torch_tensor(x):
        return gpu.torch_module().nn.functional.pad(x, (0, n - x.shape[-1]))
    x = np.asarray(x)
    return np.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, n - x.shape[-1])])


def _first_columns(res, n, return_lse):
    """An attention result (o, or (o, lse)) with o cut to its first n columns, contiguous like
    any tessel output."""
    o = res[0] if return_lse else res
    o = o[..., :n].contiguous() if gpu.is_torch_tensor(o) else np.ascontiguousarray(o[..., :n])
    return (o, res[1]) if return_lse else o


def _attention_padded(q, k, v, Dp, scale, return_lse, **kwargs):
    """tessel.attention at head dim Dp > D (padded_head_dim): zero columns appended to q, k and
    v (torch tensors: gradients flow back through the padding), the output cut back to its first
    D columns."""
    D = q.shape[-1]
    q, k, v = (_pad_columns(x, Dp) for x in (q, k, v))
    res = attention(q, k, v, scale=softmax_scale(scale, D), return_lse=return_lse, **kwargs)
    return _first_columns(res, D, return_lse)


def value_head_dim_differs(q, k, v, rank=4):
    """Whether v is k's shape but for its last axis, q's last axis being k's (SDPA's Ev != E:
    DeepSeek's MLA prefill has q/k at 192 and v at 128). A few attribute tests on the common
    path. `rank`: 4 for [B, H, N, D], 3 for attention_varlen's [total, H, D]."""
    try:
        ks, vs = k.shape, v.shape
        if ks[-1] == vs[-1]:            # every ordinary call stops here
            return False
        qs = q.shape
    except (AttributeError, IndexError, TypeError):
        return False                    # left to the entry point's own checks
    return len(qs) == len(ks) == len(vs) == rank and qs[-1] == ks[-1] and \
        tuple(ks[:-1]) == tuple(vs[:-1]) and ks[-1] > 0 and vs[-1] > 0


# Whether tessel.attention runs a v of its own head dim with the kernel's DV (P·V and the
# output at v's width: 192/128 at a fifth fewer FLOPs than padding v) where value_head_dim_kernel
# allows, instead of padding (call_with_value_head_dim). On since its GPU check (H100,
# 2026-12-06: test_python_gpu.py `test_value_head_dim_kernel` 40/40 against float32; fp16
# TFLOP/s of the unpadded work, padded -> DV: 192/128 4k 420 -> 530, 4k causal 351 -> 481, 16k
# 468 -> 571, 16k causal 447 -> 541; 128/64 431 -> 561, 355 -> 460, 472 -> 552, 424 -> 527:
# docs/bench/2026-12-06-h100-s41.md); the interpreter checks it in CI.
VALUE_HEAD_DIM_KERNEL = True


def value_head_dim_kernel(q, k, v, mask_mod, block_mask, window_size):
    """Whether a call whose v has a head dim of its own runs the kernels' DV
    (VALUE_HEAD_DIM_KERNEL): forward calls of the dense kernels — no gradients wanted, no
    mask_mod, block_mask or window (their block-sparse kernels keep one head dim), not FP8; on
    CUDA fp16/bf16 on sm_90a with both head dims ones its fast path takes."""
    if not VALUE_HEAD_DIM_KERNEL or mask_mod is not None or block_mask is not None or \
            window_size is not None:
        return False
    if getattr(q, "is_cuda", False) and not NATIVE_STRIDED and \
            not all(x.is_contiguous() for x in (q, k, v)):
        return False
    return dv_kernel_takes(q, k, v, FAST_HEAD_DIMS, NATIVE_HEAD_DIMS)


# Whether tessel.attention with gradients runs a v narrower than q (DeepSeek's MLA training:
# 192/128) with the DV kernel's forward (P·V and o at v's width) and hands the backward v, o and
# dO as they are (the backward's programs at v's width where backward.
# VALUE_HEAD_DIM_BACKWARD_CHIPS lists the chip, else on them padded to q's head dim), where
# value_head_dim_kernel would take the call without gradients; elsewhere the whole call pads v
# (call_with_value_head_dim). On since its GPU check (H100, forty-ninth session:
# test_python_gpu.py `test_value_head_dim_of_its_own` dv and dv_programs 16/16 against float64
# autograd). Forward + backward fp16 against the padded call: 192/128 1.08-1.45x, 128/64
# 1.17-1.27x with the backward's DV programs; the DV forward alone 0.98-1.03x (its fifth less
# work is a sixth of the step): docs/bench/2026-12-07-h100-s49.md.
VALUE_HEAD_DIM_GRAD = True


def value_head_dim_grad(q, k, v, mask_mod, block_mask, window_size):
    """Whether this call takes VALUE_HEAD_DIM_GRAD's route: CUDA tensors that want gradients,
    v's head dim below q's, both ones the DV kernel takes (value_head_dim_kernel's rules),
    within the kernels' 32-bit offsets. (tessel.attention also keeps calls with a score_mod,
    softcap or ALiBi on the padded route: their DV backward has not run on a GPU.)"""
    if not VALUE_HEAD_DIM_GRAD or not VALUE_HEAD_DIM_KERNEL or mask_mod is not None or \
            block_mask is not None or window_size is not None:
        return False
    if not (getattr(q, "is_cuda", False) and _grad_enabled() and
            any(getattr(x, "requires_grad", False) for x in (q, k, v))):
        return False
    if v.shape[-1] >= q.shape[-1] or _past_i32(q, k, v):
        return False
    if not NATIVE_STRIDED and not all(x.is_contiguous() for x in (q, k, v)):
        return False
    return dv_kernel_takes(q, k, v, FAST_HEAD_DIMS, NATIVE_HEAD_DIMS, with_grad=True)


def dv_kernel_takes(q, k, v, fast_dims, native_dims, with_grad=False):
    """Whether a kernel with a DV constexpr takes this call with v of its own head dim (the
    rules tessel.attention's and attention_varlen's switches share): not FP8; numpy arrays and
    CPU tensors (the interpreter) unless gradients are wanted (`with_grad`: whether or not);
    on CUDA fp16/bf16 on sm_90a with both head dims among `fast_dims` and the chip's
    `native_dims`."""
    if getattr(getattr(q, "dtype", None), "itemsize", 0) == 1:
        return False
    if not gpu.is_torch_tensor(q):
        return True
    if not with_grad and _grad_enabled() and \
            any(getattr(x, "requires_grad", False) for x in (q, k, v)):
        return False
    if not q.is_cuda:
        return True
    chip = _chip_for_blocks(q)
    dims = fast_dims + native_dims.get(chip, ())
    return chip == "sm_90a" and gpu.torch_dtype_name(q) in _FAST_DTYPES and \
        q.shape[-1] in dims and v.shape[-1] in dims


def _value_dim(D, v):
    """The DV constexpr of a v whose head dim is not D ({} otherwise: ordinary calls keep their
    kernels' keys)."""
    return {} if v.shape[3] == D else {"DV": int(v.shape[3])}


def call_with_value_head_dim(fn, q, k, v, *args, scale=None, return_lse=False, **kwargs):
    """`fn(q, k, v, *args, scale=..., return_lse=..., **kwargs)` (tessel.attention,
    attention_varlen) where v's head dim Ev differs from q's and k's E: the smaller side padded
    with zero columns to the larger — v's (P·V's first Ev columns are unchanged) or q's and k's
    (zero columns leave q·kᵀ as it is) — and the output cut back to Ev columns. The scale stays
    1/sqrt(E). Exact and, on torch tensors, differentiable (torch pads and cuts); it costs the
    larger head dim's work in the padded product."""
    E, Ev = q.shape[-1], v.shape[-1]
    if getattr(getattr(q, "dtype", None), "itemsize", 0) == 1 or \
            getattr(getattr(v, "dtype", None), "itemsize", 0) == 1:
        raise NotImplementedError(f"FP8 attention needs one head dim for q, k and v; v has {Ev} "
                                  f"and k {k.shape[-1]}")
    if Ev < E:
        v = _pad_columns(v, E)
    else:
        q, k = _pad_columns(q, Ev), _pad_columns(k, Ev)
    res = fn(q, k, v, *args, scale=softmax_scale(scale, E), return_lse=return_lse, **kwargs)
    return _first_columns(res, Ev, return_lse)


def gpu_blocks(D, dtype, nq, nk, chip="sm_80", unmasked=False, causal=False, mods=None):
    """(BLOCK_M, BLOCK_N) tessel.attention uses on the GPU for head dim D, dtype name and chip;
    `unmasked`: the kernel is not causal and has no mask_mod (GPU_BLOCKS_UNMASKED); `causal`:
    causal without a mask_mod (GPU_BLOCKS_CAUSAL_LONG from CAUSAL_LONG_KEYS keys); `mods`:
    whether the kernel has a score_mod or a mask_mod — False: GPU_BLOCKS_PLAIN_LONG from
    CAUSAL_LONG queries and keys, True: GPU_BLOCKS_MODS, None (not said): neither."""
    if mods is False and min(nq, nk) >= CAUSAL_LONG and dtype in _FAST_DTYPES and \
            (chip, D) in GPU_BLOCKS_PLAIN_LONG:
        return GPU_BLOCKS_PLAIN_LONG[(chip, D)]
    if mods and dtype in _FAST_DTYPES and (chip, D) in GPU_BLOCKS_MODS:
        return GPU_BLOCKS_MODS[(chip, D)]
    if unmasked and dtype in _FAST_DTYPES and (chip, D) in GPU_BLOCKS_UNMASKED:
        return GPU_BLOCKS_UNMASKED[(chip, D)]
    if causal and nk >= CAUSAL_LONG_KEYS and dtype in _FAST_DTYPES and \
            (chip, D) in GPU_BLOCKS_CAUSAL_LONG:
        return GPU_BLOCKS_CAUSAL_LONG[(chip, D)]
    hit = GPU_BLOCKS.get((chip, D)) if dtype in _FAST_DTYPES else None
    if hit is not None:
        return hit
    return reference_blocks(D, nq, nk)


def reference_blocks(D, nq, nk):
    """(BLOCK_M, BLOCK_N) for the reference lowering (what the fast paths do not take)."""
    # The reference lowering keeps every live tile in shared memory: past head dim 64, 64-row
    # blocks need 280-300 KB (f32, d128: measured on the H200), more than a CTA has; 32 fit.
    cap = 64 if D <= 64 else 32
    return _block(nq, cap), _block(nk, cap)


def gather_blocks(D):
    """(BLOCK_M, BLOCK_N) on the GPU for a kernel whose mask or bias reads captured tensors when
    the reference lowering takes it (dtypes and head dims the fast paths do not): its gathered
    and index tiles live in shared memory too. A document mask with a relative bias needs 105 KB
    at d64 with 32x64 blocks and 97 KB at d128 with 32x32 (sm_80 allows 163 KB; 64x64 at d64
    needed 206 KB): test/python/test_captured_compile.py. Independent of the lengths, like the fast
    paths' blocks: _cuda_configs remembers them per (dtype, D, ...), not per length."""
    return 32, 64 if D <= 64 else 32


def _chip_for_blocks(q):
    """The chip of q's device; sm_80 where the driver cannot say (compile_attention without a
    GPU: the launch then raises GpuUnavailableError as before)."""
    try:
        return gpu.chip_of(q.get_device())
    except gpu.GpuUnavailableError:
        return "sm_80"


def check_block_sizes(block_m, block_n, fn):
    """block_m / block_n as a caller gives them, as Python ints: None (the default) or a
    positive integer (numpy's too). A bool, a float or a number below 1 is refused here: -16
    made a grid that computed wrong rows, 16.0 and True failed inside the library's source."""
    sizes = []
    for name, value in (("block_m", block_m), ("block_n", block_n)):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise TypeError(f"{fn}: {name} must be an int (or None: the default), got "
                                f"{value!r}")
            if value < 1:
                raise ValueError(f"{fn}: {name} must be at least 1 (or None: the default), "
                                 f"got {value}")
            value = int(value)
        sizes.append(value)
    return tuple(sizes)


def softmax_scale(scale, D):
    """The softmax scale a call uses: 1/sqrt(D) for None, else `scale` as a float — a real,
    finite number (numpy's and 0-d tensors' too; 0 and negative scales are allowed). A string
    or a bool is a TypeError and inf or NaN a ValueError here, not an error from float() or
    NaN rows."""
    if scale is None:
        return 1.0 / math.sqrt(D)
    if isinstance(scale, (bool, str, bytes)) or not hasattr(scale, "__float__"):
        raise TypeError(f"scale must be a real number (or None: 1/sqrt(head dim)), got "
                        f"{scale!r}")
    value = float(scale)
    if not math.isfinite(value):
        raise ValueError(f"scale must be finite, got {value}")
    return value


def _check_shapes(qs, ks, vs, enable_gqa, value_dim=False):
    """(B, H, Nq, D, Hkv, Nk) of q, k, v shapes, or a ValueError that says what does not fit.
    `value_dim`: v may have a head dim of its own (the kernels' DV)."""
    if len(qs) != 4 or len(ks) != 4 or len(vs) != 4:
        bad = next(n for n, s in (("q", qs), ("k", ks), ("v", vs)) if len(s) != 4)
        shape = {"q": qs, "k": ks, "v": vs}[bad]
        raise ValueError(f"{bad} must have shape [B, H, N, D], got {tuple(shape)}")
    B, H, Nq, D = qs
    Bk, Hkv, Nk, Dk = ks
    if tuple(vs[:3]) != tuple(ks[:3]):
        raise ValueError(f"k and v differ in shape: {tuple(ks)} and {tuple(vs)}")
    if Bk != B:
        raise ValueError(f"q {tuple(qs)} and k {tuple(ks)} differ in batch size ({B} and {Bk})")
    if Dk != D:
        raise ValueError(f"q {tuple(qs)} and k {tuple(ks)} differ in head dim ({D} and {Dk}): "
                         "q and k need one head dim")
    if vs[3] != Dk and not (value_dim and vs[3] > 0):
        # tessel.attention takes it (call_with_value_head_dim); the kernels' callers do not.
        raise ValueError(f"k {tuple(ks)} and v {tuple(vs)} differ in head dim: here q, k and v "
                         "need one (tessel.attention takes a v of another head dim)")
    if D == 0:
        raise ValueError(f"q {tuple(qs)} has head dim 0: attention needs a head dim of at least 1")
    if H != Hkv:
        if not enable_gqa:
            raise ValueError(f"q has {H} heads and k/v {Hkv}: pass enable_gqa=True for "
                             "grouped-query attention")
        if Hkv == 0 or H % Hkv:
            raise ValueError(f"the number of query heads ({H}) must be a multiple of the "
                             f"number of key/value heads ({Hkv})")
    return B, H, Nq, D, Hkv, Nk


_ARRAY_DTYPES = tuple(np.dtype(t) for t in (np.float32, np.float16, np.uint16, np.uint8))


def _prepare(q, k, v, causal, scale, score_mod, mask_mod, enable_gqa, block_m, block_n):
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, np.ndarray):
            raise TypeError(f"{name} must be a numpy array (interpreter) or a CUDA torch tensor "
                            f"(GPU), got {type(x).__name__}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v differ in dtype: {q.dtype}, {k.dtype}, {v.dtype}")
    if q.dtype not in _ARRAY_DTYPES:    # int32 arrays, fine for tessel.jit, failed in tl.dot
        raise TypeError(f"tessel.attention takes float32, float16, bf16 (uint16 bit patterns) or "
                        f"FP8 e4m3 (uint8 bit patterns) arrays, got {q.dtype}")
    B, H, Nq, D, Hkv, Nk = _check_shapes(q.shape, k.shape, v.shape, enable_gqa, True)
    scale = softmax_scale(scale, D)
    BM = block_m or _block(Nq)
    BN = block_n or _block(Nk)
    q, k, v = (np.ascontiguousarray(x) for x in (q, k, v))
    o = np.zeros((B, H, Nq, v.shape[3]), dtype=q.dtype)
    lse = np.zeros((B, H, Nq), dtype=np.float32)
    args = (q, k, v, o, lse, Nq, Nk, H, Hkv, scale)
    constexprs = dict(D=D, BLOCK_M=BM, BLOCK_N=BN, CAUSAL=bool(causal),
                      SCORE_MOD=_as_jit(score_mod, "score_mod"),
                      MASK_MOD=_as_jit(mask_mod, "mask_mod"),
                      **key_loop_constexprs(Nq, Nk, D, BM, BN, causal, score_mod, mask_mod,
                                            None),
                      **_value_dim(D, v))
    grid = fold_grid(-(-Nq // BM), B * H)
    return args, constexprs, grid, o, lse


def _flash_arguments(q, causal, window_size, softcap, alibi_slopes, score_mod, mask_mod,
                     block_mask):
    """FlashAttention's window_size, softcap and alibi_slopes as mods (flash_mods.py)."""
    from .flash_mods import _window, flash_mods
    if block_mask is not None and _window(window_size) is not None:
        raise ValueError("tessel.attention: window_size cannot be combined with a block_mask: "
                         "build the block mask from a mask_mod with the window "
                         "(q_idx - left <= kv_idx <= q_idx + right) and pass that mask_mod")
    return flash_mods(q, causal, window_size, softcap, alibi_slopes, score_mod, mask_mod)


def _grad_enabled():
    enabled = getattr(gpu.torch_module(), "is_grad_enabled", None)
    return True if enabled is None else bool(enabled())


def _refuse_grad(q, k, v):
    """Inputs that require grad, with grad mode on, get an error instead of an output without a
    grad_fn (which would fail far away in loss.backward(), or silently leave q, k and v without
    gradients inside a larger model). Duck-typed: anything with `requires_grad = True` counts.
    CUDA torch tensors never get here: they have a backward (tessel/backward.py, autograd);
    numpy users call tessel.attention_backward."""
    needs = [n for n, x in (("q", q), ("k", k), ("v", v))
             if getattr(x, "requires_grad", False) is True]
    if needs and _grad_enabled():
        raise NotImplementedError(
            f"tessel.attention: {', '.join(needs)} require{'s' if len(needs) == 1 else ''} "
            "grad, but tessel.attention has no backward pass (autograd support) for this case "
            "yet, so the output would have no grad_fn: autograd covers CUDA torch tensors only "
            "(numpy arrays: tessel.attention_backward). Detach the inputs or run under "
            "torch.no_grad() for inference.")


def compile_attention(q, k, v, causal=False, scale=None, score_mod=None, mask_mod=None,
                      enable_gqa=False, block_m=None, block_n=None, block_mask=None,
                      window_size=None, softcap=None, alibi_slopes=None):
    """The kernel :func:`attention` would run for these inputs, compiled but not run.

    Takes :func:`attention`'s arguments (``return_lse`` aside).

    Returns:
        tessel.CompiledKernel: its ``asm["tile"]`` / ``asm["tile-opt"]`` hold the IR;
        ``binary(tessel.GpuOptions(...))`` gives the cubin and PTX.
    """
    block_m, block_n = check_block_sizes(block_m, block_n, "tessel.compile_attention")
    if cpu_tensors.is_cpu_tensor(q):           # traced as the interpreter's numpy arrays
        q, k, v, alibi_slopes = (cpu_tensors.to_numpy(x) for x in (q, k, v, alibi_slopes))
    if window_size is not None or softcap is not None or alibi_slopes is not None:
        score_mod, mask_mod = _flash_arguments(q, causal, window_size, softcap, alibi_slopes,
                                               score_mod, mask_mod, block_mask)
    if block_mask is not None:
        from . import blocksparse as bmod
        args, constexprs, grid, _, _ = bmod.prepare(q, k, v, scale, score_mod, mask_mod,
                                                 enable_gqa, block_mask, block_m, block_n,
                                                 causal)
        return bmod.kernel_of(block_mask, args, constexprs, grid).warmup(*args, **constexprs)
    if gpu.is_torch_tensor(q):
        args, constexprs, _, _, _, kernel = _prepare_cuda(q, k, v, causal, scale, score_mod,
                                                          mask_mod, enable_gqa, block_m, block_n)
        return kernel.warmup(*args, **constexprs)
    args, constexprs, _, _, _ = _prepare(q, k, v, causal, scale, score_mod, mask_mod,
                                         enable_gqa, block_m, block_n)
    return attention_kernel.warmup(*args, **constexprs)


def attention(q, k, v, causal=False, scale=None, score_mod=None, mask_mod=None,
              enable_gqa=False, return_lse=False, block_m=None, block_n=None, block_mask=None,
              deterministic=False, descale_q=None, descale_k=None, descale_v=None,
              out_dtype=None, window_size=None, softcap=None, alibi_slopes=None):
    """Scaled dot-product attention with PyTorch SDPA semantics and FlexAttention-style mods.

    numpy arrays and torch CPU tensors run on the CPU interpreter (a CPU tensor as a numpy
    view of its memory, the results as CPU tensors); CUDA torch tensors on the GPU, on torch's
    current stream. Torch tensors that require grad (grad mode on) go through torch.autograd:
    ``o`` and ``lse`` get a grad_fn whose backward runs the derived backward programs; numpy
    users call :func:`attention_backward`.

    Args:
        q: queries, ``[B, H, Nq, D]``: float32, float16 or bf16 (numpy: uint16 bit patterns,
            :func:`tessel.to_bf16`); CUDA tensors fp16, bf16 or fp32. On CUDA, fp16 and bf16
            at head dims 64, 128 and 256 take the tensor-core paths; other head dims below 256
            run there padded with zero columns to the next of these (a copy of q, k and v).
            CUDA tensors are read in place when contiguous or when their rows are evenly
            spaced — ``x.transpose(1, 2)`` of FlashAttention's ``[B, N, H, D]``, q/k/v of a
            packed qkv (last axis contiguous, strides multiples of 16 bytes); other layouts
            are copied first. FP8: ``torch.float8_e4m3fn`` on sm_90a at head dims 128 and
            256 (numpy: uint8 bit patterns, :func:`tessel.to_fp8`), with ``descale_*`` and
            ``out_dtype`` below; no mask blocks and no gradients there.
        k: keys, ``[B, Hkv, Nk, D]``, ``Hkv = H`` unless ``enable_gqa``.
        v: values, like ``k``; its head dim ``Ev`` may differ from ``D`` (PyTorch SDPA's
            ``Ev``; DeepSeek's MLA prefill is 192/128): ``o`` then has ``Ev`` columns and the
            smaller side runs padded with zero columns to the larger (exact, differentiable;
            not FP8).
        causal: mask keys after the query, top-left aligned (``q_idx >= kv_idx``).
        scale: the factor of the scores; ``1/sqrt(D)`` by default.
        score_mod: a ``@tessel.jit`` function (or lambda) ``(score, b, h, q_idx, kv_idx)``
            returning the new float scores.
        mask_mod: a ``@tessel.jit`` function (or lambda) ``(b, h, q_idx, kv_idx)`` returning a
            boolean tile, True where attention is allowed; combined with ``causal`` by "and".
        enable_gqa: allow ``Hkv`` dividing ``H`` (grouped-query attention: query head ``h``
            reads key/value head ``h // (H // Hkv)``).
        return_lse: also return the log-sum-exp of each row's scores.
        block_m: the query block size (a power of two >= 16, or 192: three warpgroups on
            sm_90a's wgmma path); by default one each lowering takes, by head dim, lengths and
            mods (docs/bench/forward-defaults.md).
        block_n: the key block size, likewise.
        block_mask: a :class:`tessel.BlockMask` made by :func:`tessel.block_mask` from the same
            ``mask_mod`` (and shapes): the key loop then visits only its non-empty blocks, the
            full ones without mask arithmetic. FlexAttention's BlockMask (create_block_mask)
            is taken over; its own mask_mod is the default there. ``block_m`` /
            ``block_n``, if given, are the kernel's blocks and must divide the mask's;
            ``causal`` must then be False (put ``q_idx >= kv_idx`` in the mask_mod).
            Differentiable on CUDA (the backward visits the same blocks). Without it, CUDA
            calls whose mask_mod reads a captured tensor build one themselves (docs/dsl.md,
            "Block masks").
        deterministic: a backward whose gradients are the same bit for bit from run to run.
            By default (as FlashAttention's ``deterministic=False``) the sm_90a backward may
            add dq up from its key blocks with float32 atomics, in an order that varies;
            True (or ``torch.use_deterministic_algorithms(True)``) runs dq's own program.
        descale_q: FP8 only: the factor q's values are multiplied by (FlashAttention-3's
            descale); a number or a tensor broadcastable to ``[B, Hkv]``. 1 by default.
        descale_k: likewise for k: the scores are ``scale · descale_q · descale_k · q8·k8ᵀ``.
        descale_v: likewise for v: the output is multiplied by it.
        out_dtype: FP8 only: the output's dtype, bfloat16 (the default) or float16.
        window_size: FlashAttention's sliding window ``(left, right)``: query ``i`` sees keys
            ``i - left`` to ``i + right`` (-1: no bound on that side; ``(-1, -1)``: none),
            and-ed with ``causal`` and ``mask_mod``. Positions are top-left aligned, as
            ``causal``'s (FlashAttention aligns them to the bottom right when Nq != Nk).
            Not with a ``block_mask`` (build it from a mask_mod with the window).
        softcap: FlashAttention's soft cap: the scaled scores become
            ``softcap · tanh(score / softcap)`` (0 or None: none), before ``alibi_slopes`` and
            the ``score_mod``.
        alibi_slopes: FlashAttention's ALiBi: float32 ``[H]`` or ``[B, H]`` (where q is), the
            bias ``-slope · |i - j|`` added to the (capped) scores before the ``score_mod``.

    Returns:
        ``o`` like ``q`` (on the GPU a new tensor: contiguous for a contiguous q, else a
        ``[B, Nq, H, D]`` buffer seen as ``[B, H, Nq, D]``, as SDPA's flash backend returns
        it), or ``(o, lse)`` with ``return_lse``, lse
        float32 ``[B, H, Nq]``. Rows with every key masked give 0 and lse ``-inf``.

    Raises:
        tessel.CompilationError: a score_mod or mask_mod that does not compile (located in the
            user's function), or returns the wrong type.
        ValueError: shapes that do not match, a block_mask that does not fit the call, or a
            block_m / block_n below 1.
        TypeError: inputs that are neither numpy arrays nor CPU or CUDA torch tensors, mixed
            kinds, inputs that differ in dtype or have none attention takes, or a block_m /
            block_n that is not an int.
        NotImplementedError: numpy inputs while autograd would want gradients.
    """
    if block_mask is not None and flex.is_flex_block_mask(block_mask):
        mask_mod, block_mask = flex.taken_over(block_mask, mask_mod, torch_ops.compiling(q))
    if torch_ops.compiling(q):          # under torch.compile: one node of the graph
        return torch_ops.attention(q, k, v, causal, scale, score_mod, mask_mod, enable_gqa,
                                   return_lse, block_m, block_n, block_mask, deterministic,
                                   descale_q, descale_k, descale_v, out_dtype, window_size,
                                   softcap, alibi_slopes)
    if block_m is not None or block_n is not None:
        block_m, block_n = check_block_sizes(block_m, block_n, "tessel.attention")
    if value_head_dim_differs(q, k, v) and score_mod is None and softcap is None and \
            alibi_slopes is None and value_head_dim_grad(q, k, v, mask_mod, block_mask,
                                                         window_size):
        from .backward import attention_with_grad
        return attention_with_grad(q, k, v, causal, scale, score_mod, mask_mod, enable_gqa,
                                   return_lse, block_m, block_n, deterministic=deterministic)
    if value_head_dim_differs(q, k, v) and not value_head_dim_kernel(q, k, v, mask_mod,
                                                                     block_mask, window_size):
        return call_with_value_head_dim(
            attention, q, k, v, return_lse=return_lse, causal=causal, scale=scale,
            score_mod=score_mod, mask_mod=mask_mod, enable_gqa=enable_gqa, block_m=block_m,
            block_n=block_n, block_mask=block_mask, deterministic=deterministic,
            window_size=window_size, softcap=softcap, alibi_slopes=alibi_slopes)
    if cpu_tensors.is_cpu_tensor(q):
        return cpu_tensors.attention(
            q, k, v, return_lse, causal=causal, scale=scale, score_mod=score_mod,
            mask_mod=mask_mod, enable_gqa=enable_gqa, block_m=block_m, block_n=block_n,
            block_mask=block_mask, deterministic=deterministic, descale_q=descale_q,
            descale_k=descale_k, descale_v=descale_v, out_dtype=out_dtype,
            window_size=window_size, softcap=softcap, alibi_slopes=alibi_slopes)
    if window_size is not None or softcap is not None or alibi_slopes is not None:
        score_mod, mask_mod = _flash_arguments(q, causal, window_size, softcap, alibi_slopes,
                                               score_mod, mask_mod, block_mask)
    # FP8 takes its own program. Every call pays this test, so it looks at the element size
    # first (0.1 us; the whole FP8 test with the import costs 0.7 on the fp16 path).
    if getattr(getattr(q, "dtype", None), "itemsize", 0) == 1:
        from . import attention_fp8
        if attention_fp8.is_fp8(q):
            if block_mask is not None:
                raise NotImplementedError("FP8 attention does not take a block_mask yet")
            if gpu.is_torch_tensor(q) and _grad_enabled() and any(
                    getattr(x, "requires_grad", False) for x in (q, k, v)):
                raise NotImplementedError("FP8 attention has no backward: call it under "
                                          "torch.no_grad() or on tensors that do not require "
                                          "grad")
            return attention_fp8.attention(q, k, v, causal, scale, score_mod, mask_mod,
                                           enable_gqa, return_lse, block_m, block_n, descale_q,
                                           descale_k, descale_v, out_dtype)
    if descale_q is not None or descale_k is not None or descale_v is not None or \
            out_dtype is not None:
        raise TypeError("descale_q, descale_k, descale_v and out_dtype are for FP8 inputs "
                        f"(float8_e4m3fn); q is {getattr(q, 'dtype', type(q).__name__)}")
    if _past_i32(q, k, v):
        return _attention_in_chunks(q, k, v, causal, scale, score_mod, mask_mod, enable_gqa,
                                    return_lse, block_m, block_n, block_mask, deterministic)
    Dp = _cuda_padding(q, k, v)
    sparse_dim = None           # the block-sparse kernel's DB (block_head_dim_sparse)
    if Dp is not None:
        grad = _grad_enabled() and any(getattr(x, "requires_grad", False) for x in (q, k, v))
        chip = _chip_for_blocks(q)
        if native_head_dim(q.shape[-1], gpu.torch_dtype_name(q), chip, grad,
                           mask_mod is not None or block_mask is not None,
                           all(x.is_contiguous() for x in (q, k, v))):
            Dp = None
        elif block_head_dim_takes(q, v, Dp, chip, grad,
                                  block_head_dim_masked(mask_mod, block_mask)):
            if grad:
                from .backward import attention_with_grad
                return attention_with_grad(q, k, v, causal, scale, score_mod, mask_mod,
                                           enable_gqa, return_lse, block_m, block_n,
                                           deterministic=deterministic, block_dim=Dp)
            return _attention_cuda(q, k, v, causal, scale, score_mod, mask_mod, enable_gqa,
                                   return_lse, block_m, block_n, block_dim=Dp)
        elif block_head_dim_sparse(q, v, Dp, chip, grad, mask_mod, block_mask, block_m, block_n):
            if block_mask is None:
                # A mask read from tensors: its block mask made here (auto_block_mask, causal
                # folded in), so the call takes the block_mask route below; none made, it pads.
                from . import blocksparse as bmod
                auto = bmod.auto_block_mask(q, k, causal, mask_mod, enable_gqa, Dp)
                if auto is not None:
                    block_mask, mask_mod, causal = auto[0], auto[1], False
            if block_mask is not None:
                sparse_dim, Dp = Dp, None
    if Dp is not None:
        return _attention_padded(q, k, v, Dp, scale, return_lse, causal=causal,
                                 score_mod=score_mod, mask_mod=mask_mod, enable_gqa=enable_gqa,
                                 block_m=block_m, block_n=block_n, block_mask=block_mask,
                                 deterministic=deterministic)
    if block_mask is not None:
        from . import blocksparse as bmod
        if bmod.runs_as_causal(block_mask, block_m, block_n):
            B, H, Nq, _, _, Nk = _check_shapes(q.shape, k.shape, v.shape, enable_gqa)
            bmod.check_block_mask(block_mask, mask_mod, B, H, Nq, Nk, gpu.is_torch_tensor(q),
                                  causal, None, None)
            return attention(q, k, v, causal=True, scale=scale, score_mod=score_mod,
                             enable_gqa=enable_gqa, return_lse=return_lse,
                             deterministic=deterministic)
        if not gpu.is_torch_tensor(q):
            _refuse_grad(q, k, v)
        return bmod.attention(q, k, v, scale, score_mod, mask_mod, enable_gqa, return_lse,
                              block_mask, block_m, block_n, causal,
                              deterministic=deterministic, block_dim=sparse_dim)
    if gpu.is_torch_tensor(q):
        if (getattr(q, "requires_grad", False) or getattr(k, "requires_grad", False)
                or getattr(v, "requires_grad", False)) and _grad_enabled():
            from .backward import attention_with_grad
            return attention_with_grad(q, k, v, causal, scale, score_mod, mask_mod, enable_gqa,
                                       return_lse, block_m, block_n,
                                       deterministic=deterministic)
        if mask_mod is not None and block_m is None and block_n is None:
            # A mask read from tensors: block sparsity at run time (blocksparse.auto_block_mask).
            from . import blocksparse as bmod
            auto = bmod.auto_block_mask(q, k, causal, mask_mod, enable_gqa)
            if auto is not None:
                return bmod.attention(q, k, v, scale, score_mod, auto[1], enable_gqa,
                                      return_lse, auto[0], None, None, False)
        return _attention_cuda(q, k, v, causal, scale, score_mod, mask_mod, enable_gqa,
                               return_lse, block_m, block_n)
    _refuse_grad(q, k, v)
    args, constexprs, grid, o, lse = _prepare(q, k, v, causal, scale, score_mod, mask_mod,
                                              enable_gqa, block_m, block_n)
    # No query rows, batches or heads: an empty result, as on the GPU (no kernel runs there).
    if grid[0] and grid[1]:
        attention_kernel[grid](*args, **constexprs)
    return (o, lse) if return_lse else o


# The kernels address elements with 32-bit offsets (`(b·H + h)·N·D` is an i32 in the tile IR):
# a tensor whose elements reach past this is run in chunks of batches (or of heads) that do not.
I32_ELEMENTS = 2**31


def _span(x):
    """Elements from x's first to its last one, + 1 (numel for a contiguous x)."""
    shape = x.shape
    if 0 in shape:
        return 0
    if gpu.is_torch_tensor(x):
        strides = x.stride()
    else:
        strides = [s // x.itemsize for s in x.strides]
    span = 1
    for n, st in zip(shape, strides):
        span += (n - 1) * (st if st >= 0 else -st)
    return span


def _past_i32(q, k, v):
    """Whether q, k or v spans I32_ELEMENTS or more (on every call: numel for contiguous
    tensors, the strides' span for the others)."""
    try:
        if len(q.shape) != 4:
            return False
        for x in (q, k, v):
            if x.is_contiguous() if gpu.is_torch_tensor(x) else x.flags.c_contiguous:
                n = x.numel() if gpu.is_torch_tensor(x) else x.size
            else:
                n = _span(x)
            if n >= I32_ELEMENTS:
                return True
        return False
    except (AttributeError, TypeError):
        return False              # not arrays: the usual checks explain it


def _attention_in_chunks(q, k, v, causal, scale, score_mod, mask_mod, enable_gqa, return_lse,
                         block_m, block_n, block_mask, deterministic=False):
    """tessel.attention over tensors of I32_ELEMENTS or more: one call per chunk of batches — or,
    where one batch alone is too large, of heads (whole GQA groups) — each below the limit, the
    outputs concatenated (differentiable through torch.cat). Mods and block masks see batch and
    head indices, which a chunk would renumber: refused."""
    def run(bq, hq, hk):
        return attention(q[bq, hq], k[bq, hk], v[bq, hk], causal=causal, scale=scale,
                         enable_gqa=enable_gqa, return_lse=True, block_m=block_m,
                         block_n=block_n, deterministic=deterministic)
    return in_chunks(q, k, v, score_mod is not None or mask_mod is not None or
                     block_mask is not None, enable_gqa, return_lse, run)


def in_chunks(q, k, v, mods, enable_gqa, return_lse, run):
    """_attention_in_chunks' chunking, for any attention call: `run(bq, hq, hk)` is the call on
    q[bq, hq] and k, v[bq, hk] (batch and head slices), returning (o, lse); `mods`: the call
    has a score_mod, mask_mod or block_mask (refused)."""
    if mods:
        raise ValueError(
            f"tessel.attention: q, k or v spans {max(_span(x) for x in (q, k, v))} elements, "
            "past the 2^31 the kernels' 32-bit offsets reach; with a score_mod, mask_mod or "
            "block_mask (which see batch and head indices) split the batch into calls below it")
    B, H = q.shape[0], q.shape[1]
    Hkv = k.shape[1]
    if Hkv == 0 or H % Hkv:
        _check_shapes(q.shape, k.shape, v.shape, enable_gqa)   # explains the shapes
    group = H // Hkv
    limit = I32_ELEMENTS - 1
    per_batch = max(_span(x[:1]) for x in (q, k, v))
    if per_batch <= limit:
        step = max(1, limit // per_batch)
        parts = [(slice(b, b + step), slice(None), slice(None)) for b in range(0, B, step)]
    else:
        per_group = max(_span(q[:1, :group]), _span(k[:1, :1]), _span(v[:1, :1]))
        if per_group > limit:
            raise ValueError(f"tessel.attention: one head of one batch spans {per_group} "
                             "elements, past the 2^31 the kernels' 32-bit offsets reach")
        g = max(1, limit // per_group)             # GQA groups a chunk
        parts = [(slice(b, b + 1), slice(j * group, (j + g) * group), slice(j, j + g))
                 for b in range(B) for j in range(0, Hkv, g)]
    outs = [run(bq, hq, hk) for bq, hq, hk in parts]
    axis = 0 if parts[0][1] == slice(None) else None
    if gpu.is_torch_tensor(q):
        torch = gpu.torch_module()
        cat = torch.cat
    else:
        cat = np.concatenate
    if axis == 0:
        o, lse = cat([x[0] for x in outs], 0), cat([x[1] for x in outs], 0)
    else:   # batches of head chunks: heads within a batch, then batches
        per_b = len(parts) // B
        rows = [(cat([x[0] for x in outs[b * per_b:(b + 1) * per_b]], 1),
                 cat([x[1] for x in outs[b * per_b:(b + 1) * per_b]], 1)) for b in range(B)]
        o, lse = cat([r[0] for r in rows], 0), cat([r[1] for r in rows], 0)
    return (o, lse) if return_lse else o


def _prepare_cuda(q, k, v, causal, scale, score_mod, mask_mod, enable_gqa, block_m, block_n,
                  block_dim=0):
    torch = gpu.torch_module()
    for name, x in (("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"q is a torch tensor, {name} a {type(x).__name__}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v differ in dtype: {q.dtype}, {k.dtype}, {v.dtype}")
    if not q.is_cuda:
        raise TypeError(f"q is on {q.device}: tessel.attention runs CUDA tensors on the GPU and "
                        "numpy arrays on the CPU interpreter")
    B, H, Nq, D, Hkv, Nk = _check_shapes(q.shape, k.shape, v.shape, enable_gqa, True)
    dtype = gpu.torch_dtype_name(q)
    scale = softmax_scale(scale, D)
    # The chip of q's device picks the blocks. The choice is remembered per (dtype, D, ...), not
    # per device: a process with an sm_80 and an sm_90 device runs the first chip's blocks on
    # both, which is correct everywhere and fastest on the first.
    chip = _chip_for_blocks(q)
    # A v of its own head dim (DV) takes the blocks of the wider of the two: O's columns weigh
    # on the registers as much as Q's (d64's 192-row blocks spilled 1.5 KB with a v of 128).
    # Blocks wider than D (block_dim: DB) take the blocks, stages and schedules of their width.
    Dk = block_dim or D
    dm, dn = gpu_blocks(max(Dk, v.shape[3]), dtype, Nq, Nk, chip,
                        unmasked=not causal and mask_mod is None,
                        causal=causal and mask_mod is None,
                        mods=score_mod is not None or mask_mod is not None)
    BM, BN = block_m or dm, block_n or dn
    # Each input is read in place where layouts.row_layout finds its rows (a [B, N, heads, D]
    # tensor seen as [B, heads, N, D], as FlashAttention's layout is); others are copied.
    q, k, v = (in_place(x) for x in (q, k, v))
    o = output_like(q, torch, v.shape[3])
    lse = torch.empty((B, H, Nq), dtype=torch.float32, device=q.device)
    args = (q, k, v, o, lse, Nq, Nk, H, Hkv, scale)
    constexprs = dict(D=D, BLOCK_M=BM, BLOCK_N=BN, CAUSAL=bool(causal),
                      SCORE_MOD=_as_jit(score_mod, "score_mod"),
                      MASK_MOD=_as_jit(mask_mod, "mask_mod"),
                      **layout_constexprs(Q=q, K=k, V=v, O=o), **_value_dim(D, v),
                      **({"DB": block_dim} if block_dim else {}))
    fast = dtype in _FAST_DTYPES and (chip, Dk) in GPU_BLOCKS
    if (score_mod is not None or mask_mod is not None) and not (block_m or block_n) and \
            not fast and (BM, BN) != gather_blocks(Dk) and _gathers(args, constexprs):
        # A mask or bias that reads a captured tensor gathers: where the reference lowering
        # takes the kernel, blocks its shared memory holds (the fast paths gather into
        # registers at their own blocks).
        BM, BN = gather_blocks(Dk)
        constexprs.update(BLOCK_M=BM, BLOCK_N=BN)
    constexprs.update(key_loop_constexprs(Nq, Nk, Dk, BM, BN, causal, score_mod, mask_mod,
                                          chip))
    programs = persistent_programs(q, chip, BM, BN, -(-Nq // BM) * B * H, causal)
    if programs:
        tiles, starts = dense_schedule(q, Nq, Nk, B * H, BM, BN, causal, programs,
                                       constexprs["ALIGN_END"])
        args += (B * H, tiles, starts)
        return args, constexprs, (programs, 1, 1), o, lse, cuda_kernel(args, constexprs, chip)
    grid = fold_grid(-(-Nq // BM), B * H)
    return args, constexprs, grid, o, lse, cuda_kernel(args, constexprs, chip)


# attention_kernel's ten run-time arguments, then persistent_attention_kernel's n_bh, tiles and
# starts.
_PERSISTENT_ARGS = 13


# The persistent kernel's variants by their schedule switches (grid.schedule_switches); the one
# whose producer copies Q too (grid.short_tiles) made here.
_persistent_variants = {}
_persistent_once = with_switches(persistent_attention_kernel, {"producer_once": True},
                                 _persistent_variants)


def persistent_kernel(Nq, Nk, D, BM, BN, causal):
    """persistent_attention_kernel, or its variant copying Q from the producer where the tiles
    visit few key blocks (grid.short_tiles; causal rows half of them on average) and Q's second
    buffer fits beside the ring (grid.PRODUCER_ONCE_MAX_D)."""
    blocks = -(-Nk // BN)
    short = short_tiles((blocks + 1) / 2 if causal and Nq >= Nk else blocks, D)
    return with_switches(persistent_attention_kernel, schedule_switches(short, BM),
                         _persistent_variants)


def cuda_kernel(args, constexprs, chip):
    """The kernel _prepare_cuda's `args` and `constexprs` are for on `chip`:
    persistent_attention_kernel (persistent_kernel) takes n_bh and its schedule after
    attention_kernel's arguments; attention_kernel has GPU_STAGES' ring where it differs."""
    c = constexprs
    D = c.get("DB") or c["D"]                     # the blocks' head dim
    if len(args) != _PERSISTENT_ARGS:
        stages = GPU_STAGES.get((chip, D, c["BLOCK_M"], c["BLOCK_N"]))
        return attention_kernel.with_options(num_stages=stages) if stages else attention_kernel
    return persistent_kernel(args[5], args[6], D, c["BLOCK_M"], c["BLOCK_N"], c["CAUSAL"])


# (device ordinal, Nq, Nk, B·H, BM, BN, causal, programs) -> the schedule tensors
# (dense_schedule).
_schedules = {}


def dense_schedule(q, Nq, Nk, rows, BM, BN, causal, programs, align=False):
    """The persistent kernel's (tiles, starts) on q's device (grid.greedy_schedule), kept per
    shape: a tile costs the key blocks its query block visits and one more (its prologue and
    epilogue); causal rows visit the keys up to their last query (`align`: the blocks aligned
    to the last row, attention_tile's ALIGN_END). Kernels that are not causal deal the same
    round-robin schedule themselves (grid.dense_tiles) and do not read it."""
    key = (q.get_device(), Nq, Nk, rows, BM, BN, causal, programs, align)
    hit = _schedules.get(key)
    if hit is None:
        per_row = dense_tile_costs(Nq, Nk, BM, BN, causal, align)
        tiles, starts = greedy_schedule(np.tile(per_row, rows), programs)
        torch = gpu.torch_module()
        if len(_schedules) >= _CUDA_CONFIGS_MAX:
            _schedules.clear()
        hit = _schedules[key] = (torch.from_numpy(tiles).to(q.device),
                                 torch.from_numpy(starts).to(q.device))
    return hit


def dense_tile_costs(Nq, Nk, BM, BN, causal, align):
    """dense_schedule's cost of each tile of a b·h row, in the persistent kernel's order (causal:
    query block nb − 1 − i first): the key blocks it visits and one more."""
    if not causal:
        return np.full(-(-Nq // BM), -(-Nk // BN) + 1)
    end = query_block_rows(Nq, BM, align)[1][::-1]
    return -(-np.minimum(Nk, end) // BN) + 1


# (dtype, D, causal, SCORE_MOD, MASK_MOD) -> whether the kernel reads captured tensors: a closure
# over tensors is prepared anew at every call (never in _cuda_configs), and this spares it the
# trace lookup. ModFunctions compare by function and role, so every closure of one code shares
# the entry. Emptied at _CUDA_CONFIGS_MAX entries.
_gathering = {}


def _gathers(args, constexprs):
    c = constexprs
    # Unbound ModFunctions in the key: a bound one's user_fn would keep its tensors alive.
    mods = tuple(m.bound_to(None) if m is not None and m.user_fn is not None else m
                 for m in (c["SCORE_MOD"], c["MASK_MOD"]))
    key = (args[0].dtype, c["D"], c["CAUSAL"]) + mods
    hit = _gathering.get(key)
    if hit is None:
        if len(_gathering) >= _CUDA_CONFIGS_MAX:
            _gathering.clear()
        hit = _gathering[key] = bool(attention_kernel.warmup(*args, **constexprs).captures)
    return hit


_cuda_configs = {}   # (dtype, D, causal, score_mod, mask_mod, block_m, block_n) -> constexprs
# The user's functions key _cuda_configs by identity (the lean path's lookup must stay a dict
# hit): a lambda made anew per call adds an entry per call, so the dict is emptied when it
# reaches this size (the kernels themselves are shared through _as_jit's code key).
_CUDA_CONFIGS_MAX = 64

# gpu.scratch_f32's pool of the LSE nobody asked for (return_lse=False), instead of a torch
# allocation per call (~4 us of the ~12 us tessel.attention spent above its kernel launch on the
# H200). Writes from concurrent kernels to the same buffer race, harmlessly: nothing reads it.
_lse_buffers = {}


def _attention_cuda(q, k, v, causal, scale, score_mod, mask_mod, enable_gqa, return_lse,
                    block_m, block_n, block_dim=0):
    """The GPU path, kept lean: a call on known shapes of arguments costs the two output
    allocations, a dict lookup and the kernel's launch path. Anything unusual (bad shapes,
    dtypes, devices, layouts that need a copy) goes through _prepare_cuda, which explains it.
    Tensors whose rows the kernel reads in place (layouts.row_layout) key their own entry."""
    torch = gpu.torch_module()
    qs = q.shape
    ks = k.shape
    dt = q.dtype
    try:
        B, H, Nq, D = qs
        Bk, Hkv, Nk, Dk = ks
        # torch dtypes are singletons: `is` is their equality. v is often k (self-attention
        # benchmarks, shared K/V): then its checks are k's.
        ok = (Bk == B and Dk == D and (Hkv == H or (enable_gqa and Hkv and H % Hkv == 0))
              and type(k) is type(q) and k.dtype is dt
              and (v is k or (type(v) is type(q) and v.dtype is dt and v.shape == ks))
              and q.is_cuda)
        # () for contiguous tensors (the kernel's default layout), else the layout constexprs.
        lay = () if q.is_contiguous() and k.is_contiguous() and v.is_contiguous() and not \
            (q.data_ptr() | k.data_ptr() | v.data_ptr()) % 16 else \
            lean_layout(q, k, v) if ok else None
        ok = ok and lay is not None
    except (ValueError, AttributeError):
        ok = False
    # Blocks depend on the lengths (gpu_blocks): long and short ones are different entries.
    key = (dt, D, causal, score_mod, mask_mod, block_m, block_n, lay,
           Nk >= CAUSAL_LONG, Nq >= CAUSAL_LONG, Nk >= CAUSAL_LONG_KEYS, block_dim) if ok else None
    c = _cuda_configs.get(key) if ok else None
    if c is None:
        args, cx, grid, o, lse, kernel = _prepare_cuda(q, k, v, causal, scale, score_mod,
                                                       mask_mod, enable_gqa, block_m, block_n,
                                                       block_dim)
        consts = (cx["D"], cx["BLOCK_M"], cx["BLOCK_N"], cx["CAUSAL"], cx["SCORE_MOD"],
                  cx["MASK_MOD"]) + tuple(cx[n] for n in ATTENTION_LAYOUT)
        # A closure over tensors is not remembered: the entry would keep its tensors alive,
        # and they are read from the function of each call anyway.
        bound = any(getattr(m, "user_fn", None) is not None for m in consts[4:6])
        if ok and not bound and ((gpu.torch_dtype_name(q) in _FAST_DTYPES and (
                D in FAST_HEAD_DIMS or D in NATIVE_HEAD_DIMS.get(_chip_for_blocks(q), ())
                or block_dim)) or (block_m and block_n)):
            if len(_cuda_configs) >= _CUDA_CONFIGS_MAX:
                _cuda_configs.clear()
            # A persistent kernel's programs: at most the SM count (grid.persistent_programs).
            from .serving_decode import num_sms
            sms = num_sms(q) if len(args) == _PERSISTENT_ARGS else 0
            # The one-program-a-tile kernel (its stages: GPU_STAGES), or the persistent one's
            # programs (chosen at each call: persistent_kernel).
            chip = _chip_for_blocks(q)
            Db = block_dim or D                      # the blocks' head dim
            tail = tail_first(causal, mask_mod, Db, consts[1], consts[2], chip)
            even = not tail and even_keys_allowed(causal, mask_mod)
            diagonal = diagonal_first_allowed(causal, mask_mod, Db, consts[1], consts[2], chip)
            align = align_end_allowed(causal, score_mod, mask_mod, diagonal)
            # (DV 0, then DB: the blocks' head dim where they are wider than D, else 0)
            extra = (0, block_dim)
            _cuda_configs[key] = (consts, 1.0 / math.sqrt(D), sms, None if sms else kernel,
                                  even, diagonal, tail, extra, align)
        if grid[0] and grid[1]:
            # (every constexpr after TAIL_FIRST passed, DV and DB as 0 where not given)
            kernel._runner(grid, *args, *consts, cx["EVEN_N"], cx["DIAGONAL_FIRST"],
                           cx["TAIL_FIRST"], cx.get("DV", 0), cx.get("DB", 0), cx["ALIGN_END"])
        return (o, lse) if return_lse else o
    consts, default_scale, sms, plain, even, diagonal, tail, extra, align = c
    # (a finite Python float as it is: the launch path's common case; the rest checked)
    scale = default_scale if scale is None else scale if type(scale) is float and \
        scale - scale == 0.0 else softmax_scale(scale, D)
    o = torch.empty_like(q) if not lay or lay[0] == 0 else output_like(q, torch)
    lse = q.new_empty((B, H, Nq), dtype=torch.float32) if return_lse else \
        gpu.scratch_f32(_lse_buffers, q, B * H * Nq)
    if Nq and B * H:
        nb, rows = -(-Nq // consts[1]), B * H
        even = even and Nk % consts[2] == 0          # even_keys, inline on the lean path
        diagonal = diagonal and Nq <= Nk             # diagonal_first
        align = align and align_end(Nq, Nk, consts[1], consts[2], True)
        if sms:
            programs = min(nb * rows, sms)
            tiles, starts = dense_schedule(q, Nq, Nk, rows, consts[1], consts[2], consts[3],
                                           programs, align)
            kernel = persistent_kernel(Nq, Nk, extra[1] or consts[0], consts[1], consts[2],
                                       consts[3])
            kernel._runner((programs, 1, 1), q, k, v, o, lse, Nq, Nk, H, Hkv, scale, rows, tiles,
                           starts, *consts, even, diagonal, tail, *extra, align)
        else:
            grid = (nb, rows) if rows <= MAX_GRID_Y else fold_grid(nb, rows)
            plain._runner(grid, q, k, v, o, lse, Nq, Nk, H, Hkv, scale, *consts, even,
                          diagonal, tail, *extra, align)
    return (o, lse) if return_lse else o
