"""ptxas spills of the forward kernels tessel.attention ships (issue 16: 0 bytes for every
shipped configuration). Each case compiles the kernel, with the blocks and options a CUDA call
picks (gpu_blocks, SPARSE_GPU_BLOCKS, the persistent and producer_once variants), and asserts
its spill bytes: 0, or a known count that may only fall (KNOWN).
Needs ptxas (CUDA's toolkit), not a GPU. The table and what the known spills call for:
docs/dev/codegen.md, "Spills of the shipped forward kernels"."""
import dataclasses
import re

import numpy as np
import pytest

from dsl_helpers import BUILD, needs_ptxas  # noqa: F401 (puts the build's package on the path)
import tessel
import tessel.language as tl
from tessel import blocksparse, cache, grid
from tessel.attention import GPU_STAGES, attention_kernel, gpu_blocks, key_loop_constexprs, \
    persistent_attention_kernel

N = 1024
DOC = np.repeat(np.arange(4, dtype=np.int32), N // 4)[None, :]

# (chip, case) -> bytes ptxas spills today (CUDA 13.0): none since the twenty-fifth session —
# kernels with a mod take 128x32 at sm_90a d256 and 64x64 at sm_80 d128
# (attention.GPU_BLOCKS_MODS: at 128x64 they spilled 8-96 and 24-252 bytes), and sm_80 d128's
# 128x64 takes three stages (attention.GPU_STAGES: with two it spilled 12 bytes).
KNOWN = {}

# (chip, case) -> what the spill fallbacks give up in a shipped kernel today (a dense kernel's
# general key loop; its other key loops may give up no more). Anything else given up is a
# kernel that spilled and lost a schedule on the way to 0 bytes, which the spill count alone
# does not show (the thirty-second session's first d256 register change gave the causal
# persistent kernel's overlap up so: 7 % slower, 0 bytes). sm_80 d128 128x64's general kernel spills with the
# scale fold (its EVEN_N kernel keeps it: docs/dev/cold-compile.md).
GIVEN_UP = {("sm_80", "d128 full"): {"scale fold"},
            # Block masks (test_block_mask_forward_spills): a window mask with a softcap spills
            # overlapped in its full blocks' loop too (the tanh's values beside S, O and P).
            ("sm_90a", "d128 window softcap"): {"overlap-consumers"}}


def document(b, h, q_idx, kv_idx):
    return (DOC[b, q_idx] == DOC[b, kv_idx]) & (q_idx >= kv_idx)


def window(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx < 300)


BLOCKS = np.random.default_rng(0).random((N // 128, N // 128)) < 0.3


def block_table(b, h, q_idx, kv_idx):
    # 48 bytes of spill (sm_90a d128) before tile-fold-index-division made it one load a block.
    return BLOCKS[q_idx // 128, kv_idx // 128]


def softcap(score, b, h, q_idx, kv_idx):
    return 30.0 * tl.tanh(score / 30.0)


def _gpu(kernel, chip, **options):
    """The GpuOptions a launch of `kernel` on `chip` compiles with (its CompileOptions: e.g.
    tessel.attention's kernels' tma_only), with `options` on top."""
    return dataclasses.replace(kernel.options.gpu_options(chip), **options)


def _spills(tmp_path, kernel, chip, **options):
    try:
        cache.ptxas_version()
    except tessel.CompilationError as e:
        pytest.skip(str(e))
    b = cache.get_binary(kernel, _gpu(kernel, chip, **options), directory=str(tmp_path))
    return b.manifest["spill_bytes"]


def _key_loops(D, BM, BN, causal, mask_mod, chip, n=N):
    """The key loops (attention.key_loop_constexprs) calls take at n keys, a multiple of the
    key block, and at n - 8; the general kernel (all off) first."""
    general = dict(EVEN_N=False, DIAGONAL_FIRST=False, TAIL_FIRST=False)
    taken = {tuple(sorted(key_loop_constexprs(m, m, D, BM, BN, causal, None, mask_mod,
                                              chip).items()))
             for m in (n, n - 8)}
    return [general] + [dict(c) for c in sorted(taken) if dict(c) != general]


def _check(chip, case, spilled):
    assert spilled <= KNOWN.get((chip, case), 0), (chip, case, spilled)


@pytest.mark.parametrize("chip,D", [("sm_90a", 64), ("sm_90a", 128), ("sm_90a", 192),
                                    ("sm_90a", 256),
                                    ("sm_80", 64), ("sm_80", 128), ("sm_80", 256)])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_dense_forward_spills(tmp_path, chip, D, causal):
    x = np.zeros((1, 2, N, D), np.float16)
    lse = np.zeros((1, 2, N), np.float32)
    case = f"d{D} {'causal' if causal else 'full'}"
    # The blocks of short and of long calls (d128 causal takes others from CAUSAL_LONG_KEYS,
    # 1024 keys, d64 from CAUSAL_LONG, 2048 queries and keys), each compiled once, with the
    # general key loop (a key-tail mask) and each other one calls take (_key_loops: EVEN_N at
    # whole key blocks, the diagonal or the last key block first), which give up nothing the
    # general kernel keeps.
    blocks = {gpu_blocks(D, "f16", n, n, chip, unmasked=not causal, causal=causal, mods=False): n
              for n in (512, 1024, 4096)}
    for (BM, BN), nk in blocks.items():
        stages = GPU_STAGES.get((chip, D, BM, BN), 2)
        given_up = []
        for loop in _key_loops(D, BM, BN, causal, None, chip, nk):
            cx = dict(D=D, BLOCK_M=BM, BLOCK_N=BN, CAUSAL=causal, SCORE_MOD=None,
                      MASK_MOD=None, **loop)
            if (chip, BM, BN) in grid.PERSISTENT_BLOCKS or (
                    causal and (chip, BM, BN) in grid.PERSISTENT_CAUSAL_BLOCKS):
                # Shipped persistent, with and without Q from the producer (grid.short_tiles,
                # up to PRODUCER_ONCE_MAX_D).
                ids = np.zeros(8, np.int32)
                k = persistent_attention_kernel.warmup(x, x, x, x, lse, nk, nk, 2, 2, 0.1, 2,
                                                       ids, ids, **cx)
                _check(chip, case, _spills(tmp_path, k, chip))
                if D <= grid.PRODUCER_ONCE_MAX_D:
                    _check(chip, case, _spills(tmp_path, k, chip, producer_once=True))
                options = {}
            else:
                k = attention_kernel.warmup(x, x, x, x, lse, nk, nk, 2, 2, 0.1, **cx)
                options = dict(num_stages=stages)
                _check(chip, case, _spills(tmp_path, k, chip, **options))
            b = cache.get_binary(k, _gpu(k, chip, **options),
                                 directory=str(tmp_path))
            given_up.append(set(b.manifest.get("given_up", [])))
        assert all(g <= given_up[0] for g in given_up), (BM, BN, given_up)
        assert given_up[0] <= GIVEN_UP.get((chip, case), set()), (BM, BN, given_up[0])


def test_d64_diagonal_first_at_128x128_spills_nothing(tmp_path):
    # d64 at 128x128 (PEELED_BLOCKS: block_m=/block_n= calls, the candidate for 4k causal):
    # the diagonal block first as the peel — a third fewer wgmma than the split, 0 spill,
    # nothing given up.
    n = 4096
    x = np.zeros((1, 2, n, 64), np.float16)
    lse = np.zeros((1, 2, n), np.float32)
    loops = key_loop_constexprs(n, n, 64, 128, 128, True, None, None, "sm_90a")
    assert loops["DIAGONAL_FIRST"]
    counts = []
    for diagonal in (True, False):
        cx = dict(D=64, BLOCK_M=128, BLOCK_N=128, CAUSAL=True, SCORE_MOD=None, MASK_MOD=None,
                  **dict(loops, DIAGONAL_FIRST=diagonal))
        k = launched_kernel("sm_90a", x, x, x, lse, n, cx)
        b = cache.get_binary(k, _gpu(k, "sm_90a"), directory=str(tmp_path))
        assert b.manifest["spill_bytes"] == 0 and not b.manifest.get("given_up"), b.manifest
        counts.append(b.ptx.count("wgmma.mma_async"))
    assert counts[0] < counts[1], counts


def launched_kernel(chip, q, v, o, lse, n, cx):
    """The kernel tessel.attention launches for constexprs `cx` on `chip` (q as k), warmed up
    on n queries and keys: persistent where grid's tables say, else one program a tile."""
    blocks = (chip, cx["BLOCK_M"], cx["BLOCK_N"])
    if blocks in grid.PERSISTENT_BLOCKS or (cx["CAUSAL"] and
                                            blocks in grid.PERSISTENT_CAUSAL_BLOCKS):
        ids = np.zeros(8, np.int32)
        return persistent_attention_kernel.warmup(q, q, v, o, lse, n, n, 2, 2, 0.1, 2, ids, ids,
                                                  **cx)
    return attention_kernel.warmup(q, q, v, o, lse, n, n, 2, 2, 0.1, **cx)


@pytest.mark.parametrize("E,Ev", [(192, 128), (128, 64), (64, 128), (256, 128), (128, 256)])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_value_head_dim_kernels_spill_nothing(tmp_path, E, Ev, causal):
    # attention.VALUE_HEAD_DIM_KERNEL's kernels (v of its own head dim: the DV constexpr; on
    # since its GPU check) on sm_90a, at the blocks _prepare_cuda takes (those of the wider head
    # dim: d64's 192-row blocks spilled 1.5 KB with a v of 128), one program a tile or
    # persistent as tessel.attention launches them: 0 bytes, nothing given up.
    chip, n = "sm_90a", 4096
    q = np.zeros((1, 2, n, E), np.float16)
    v = np.zeros((1, 2, n, Ev), np.float16)
    o = np.zeros((1, 2, n, Ev), np.float16)
    lse = np.zeros((1, 2, n), np.float32)
    BM, BN = gpu_blocks(max(E, Ev), "f16", n, n, chip, unmasked=not causal, causal=causal,
                        mods=False)
    cx = dict(D=E, BLOCK_M=BM, BLOCK_N=BN, CAUSAL=causal, SCORE_MOD=None, MASK_MOD=None, DV=Ev,
              **key_loop_constexprs(n, n, E, BM, BN, causal, None, None, chip))
    k = launched_kernel(chip, q, v, o, lse, n, cx)
    b = cache.get_binary(k, _gpu(k, chip), directory=str(tmp_path))
    assert b.manifest["spill_bytes"] == 0 and not b.manifest.get("given_up"), b.manifest
    assert f"m64n{Ev}k16" in b.ptx      # P·V at v's width


@pytest.mark.parametrize("chip,D,DB,causal,n", [
    ("sm_90a", 96, 128, False, 4096), ("sm_90a", 80, 128, True, 4096),
    ("sm_90a", 96, 128, True, 1000), ("sm_90a", 40, 64, False, 4096),
    ("sm_90a", 160, 256, True, 4096), ("sm_80", 96, 128, False, 4096)],
    ids=["96-full", "80-causal", "96-short-causal", "40-full", "160-causal", "sm80-96-full"])
def test_block_head_dim_kernels_compile(tmp_path, chip, D, DB, causal, n):
    # attention.BLOCK_HEAD_DIM_CHIPS' kernels (head dim D read in blocks DB wide: the DB
    # constexpr) at the blocks _prepare_cuda takes for DB, one program a tile or persistent as
    # tessel.attention launches them: the fast paths (wgmma, TMA where DB's kernel has it;
    # mma.sync), 0 bytes of spill; nothing given up on sm_90a.
    x = np.zeros((1, 2, n, D), np.float16)
    lse = np.zeros((1, 2, n), np.float32)
    BM, BN = gpu_blocks(DB, "f16", n, n, chip, unmasked=not causal, causal=causal, mods=False)
    cx = dict(D=D, BLOCK_M=BM, BLOCK_N=BN, CAUSAL=causal, SCORE_MOD=None, MASK_MOD=None, DB=DB,
              **key_loop_constexprs(n, n, DB, BM, BN, causal, None, None, chip))
    k = launched_kernel(chip, x, x, x, lse, n, cx)
    b = cache.get_binary(k, _gpu(k, chip), directory=str(tmp_path))
    assert b.manifest["spill_bytes"] == 0, b.manifest
    assert chip == "sm_80" or not b.manifest.get("given_up"), b.manifest
    assert ("wgmma.mma_async" if chip == "sm_90a" else "mma.sync") in b.ptx
    if chip == "sm_90a" and DB <= 128 and not (causal and n < 2048):
        assert "cp.async.bulk.tensor" in b.ptx          # K and V through TMA
    # GpuOptions(trim_zero_columns), on by default: S's k steps only over D's columns
    # (ceil(D / 16) of DB / 16), P·V's kept; 0 spill either way.
    t = cache.get_binary(k, dataclasses.replace(_gpu(k, chip), trim_zero_columns=False),
                         directory=str(tmp_path))
    assert t.manifest["spill_bytes"] == 0, t.manifest
    op = "wgmma.mma_async" if chip == "sm_90a" else "mma.sync"
    full, trimmed = t.ptx.count(op), b.ptx.count(op)
    assert trimmed < full, (full, trimmed)


@pytest.mark.parametrize("chip", ["sm_90a", "sm_80"])
def test_block_head_dim_with_a_window_compiles(tmp_path, chip):
    # attention.BLOCK_HEAD_DIM_MASKS' kernels: head dim 96 in blocks 128 wide with
    # window_size's mask_mod (the dense kernel's MASK_MOD) at the blocks _prepare_cuda takes
    # for a masked call: the fast paths, 0 spill, nothing given up.
    from tessel.attention import _as_jit
    from tessel.flash_mods import flash_mods
    for n, window in ((4096, (256, 0)), (1000, (64, 64))):
        x = np.zeros((1, 2, n, 96), np.float16)
        lse = np.zeros((1, 2, n), np.float32)
        _, mask = flash_mods(x, False, window, None, None, None, None)
        BM, BN = gpu_blocks(128, "f16", n, n, chip, unmasked=False, causal=False, mods=True)
        cx = dict(D=96, BLOCK_M=BM, BLOCK_N=BN, CAUSAL=False, SCORE_MOD=None,
                  MASK_MOD=_as_jit(mask, "mask_mod"), DB=128,
                  **key_loop_constexprs(n, n, 128, BM, BN, False, None, mask, chip))
        k = launched_kernel(chip, x, x, x, lse, n, cx)
        b = cache.get_binary(k, _gpu(k, chip), directory=str(tmp_path))
        assert b.manifest["spill_bytes"] == 0 and not b.manifest.get("given_up"), b.manifest
        assert ("wgmma.mma_async" if chip == "sm_90a" else "mma.sync") in b.ptx


@pytest.mark.parametrize("chip", ["sm_90a", "sm_80"])
def test_trim_output_columns_narrows_the_dots_of_v(tmp_path, chip):
    # GpuOptions(trim_output_columns) (on since its GPU check): at d96 in blocks 128 wide (DB)
    # a dot whose B block is read as stored computes only the 96 output columns the copies
    # fill — the forward's P·V (wgmma N 96: m64n96k16 in place of m64n128k16), the backward's
    # dQ = dS·K and the key-rows program's dV and dK — with no more spill than without it;
    # mma.sync keeps its n tiles; nothing changes where the copies fill their blocks (d128).
    op = "wgmma.mma_async" if chip == "sm_90a" else "mma.sync"
    n = 4096
    x = np.zeros((1, 2, n, 96), np.float16)
    lse = np.zeros((1, 2, n), np.float32)
    BM, BN = gpu_blocks(128, "f16", n, n, chip, unmasked=True, causal=False, mods=False)
    cx = dict(D=96, BLOCK_M=BM, BLOCK_N=BN, CAUSAL=False, SCORE_MOD=None, MASK_MOD=None, DB=128,
              **key_loop_constexprs(n, n, 128, BM, BN, False, None, None, chip))
    forward = launched_kernel(chip, x, x, x, lse, n, cx)
    for k, _ in [(forward, None)] + _backward_programs(chip, 96, n, True):
        g = _gpu(k, chip)
        assert g.trim_output_columns                  # (on by default)
        out = cache.get_binary(k, g, directory=str(tmp_path))
        plain = cache.get_binary(k, dataclasses.replace(g, trim_output_columns=False),
                                 directory=str(tmp_path))
        assert out.manifest["spill_bytes"] <= plain.manifest["spill_bytes"], out.manifest
        if chip == "sm_90a":
            assert "m64n96k16" in out.ptx and "m64n96k16" not in plain.ptx
        else:                                   # (mma.sync keeps its n tiles: MmaSync.cpp)
            assert out.ptx.count(op) == plain.ptx.count(op)
    whole = np.zeros((1, 2, n, 128), np.float16)
    k = launched_kernel(chip, whole, whole, whole, lse, n, dict(cx, D=128, DB=0))
    g = _gpu(k, chip)
    assert cache.get_binary(k, g, directory=str(tmp_path)).ptx == cache.get_binary(
        k, dataclasses.replace(g, trim_output_columns=False), directory=str(tmp_path)).ptx


def test_trim_zero_columns_leaves_whole_blocks_alone(tmp_path):
    # Where every copy fills its block's columns (D = the blocks' head dim), trim_zero_columns
    # changes nothing: the same PTX (d128 128x128 persistent, TMA; d64 one program a tile).
    for D, BM, BN, n in ((128, 128, 128, 4096), (64, 64, 128, 1000)):
        x = np.zeros((1, 2, n, D), np.float16)
        lse = np.zeros((1, 2, n), np.float32)
        cx = dict(D=D, BLOCK_M=BM, BLOCK_N=BN, CAUSAL=False, SCORE_MOD=None, MASK_MOD=None,
                  **key_loop_constexprs(n, n, D, BM, BN, False, None, None, "sm_90a"))
        k = launched_kernel("sm_90a", x, x, x, lse, n, cx)
        g = _gpu(k, "sm_90a")
        assert g.trim_zero_columns                    # (on by default)
        trimmed = cache.get_binary(k, g, directory=str(tmp_path))
        plain = cache.get_binary(k, dataclasses.replace(g, trim_zero_columns=False),
                                 directory=str(tmp_path))
        assert plain.ptx == trimmed.ptx, (D, BM, BN)


@pytest.mark.parametrize("mod", [None, "softcap"])
@pytest.mark.parametrize("loop", ["DIAGONAL_FIRST", "TAIL_FIRST"])
def test_masked_block_first_spills_nothing(tmp_path, loop, mod):
    # attention.DIAGONAL_BLOCK_FIRST's kernel (sm_90a d128 128x128 causal: the diagonal block as
    # the overlapped consumers' peel, 32 wgmma instead of 48) and TAIL_BLOCK_FIRST's (not
    # causal: the last key block as the peel, at ragged key lengths): 0 bytes and nothing given
    # up, persistent (with and without Q from the producer) and one program a tile.
    x = np.zeros((1, 2, N, 128), np.float16)
    lse = np.zeros((1, 2, N), np.float32)
    ids = np.zeros(8, np.int32)
    cx = dict(D=128, BLOCK_M=128, BLOCK_N=128, CAUSAL=loop == "DIAGONAL_FIRST",
              SCORE_MOD=tessel.jit(softcap) if mod else None, MASK_MOD=None, **{loop: True})
    kernels = [(persistent_attention_kernel.warmup(x, x, x, x, lse, N, N, 2, 2, 0.1, 2, ids, ids,
                                                   **cx), options)
               for options in ({}, {"producer_once": True})]
    kernels.append((attention_kernel.warmup(x, x, x, x, lse, N, N, 2, 2, 0.1, **cx), {}))
    for k, options in kernels:
        assert _spills(tmp_path, k, "sm_90a", **options) == 0
        b = cache.get_binary(k, _gpu(k, "sm_90a", **options),
                             directory=str(tmp_path))
        assert not b.manifest.get("given_up") and b.ptx.count("wgmma.mma_async") == 32


@pytest.mark.parametrize("D", [128, 256])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("n", [4096, 4000])
def test_rescale_under_s_spills_nothing(tmp_path, D, causal, n):
    # GpuOptions.rescale_under_s (off until measured on the H200): the overlapped consumers'
    # kernels tessel.attention takes at 4k keys, whole or ragged, compile with O's rescale
    # beside the next S (other PTX) with 0 bytes and nothing given up — the first form, which
    # scaled O before the drain, made ptxas serialize the wgmmas (C7511) and spill 448 bytes
    # (d128; 1,568 at d256).
    chip = "sm_90a"
    x = np.zeros((1, 2, n, D), np.float16)
    lse = np.zeros((1, 2, n), np.float32)
    BM, BN = gpu_blocks(D, "f16", n, n, chip, unmasked=not causal, causal=causal, mods=False)
    cx = dict(D=D, BLOCK_M=BM, BLOCK_N=BN, CAUSAL=causal, SCORE_MOD=None, MASK_MOD=None,
              **key_loop_constexprs(n, n, D, BM, BN, causal, None, None, chip))
    if (chip, BM, BN) in grid.PERSISTENT_BLOCKS or (
            causal and (chip, BM, BN) in grid.PERSISTENT_CAUSAL_BLOCKS):
        ids = np.zeros(8, np.int32)
        k = persistent_attention_kernel.warmup(x, x, x, x, lse, n, n, 2, 2, 0.1, 2, ids, ids, **cx)
    else:
        k = attention_kernel.warmup(x, x, x, x, lse, n, n, 2, 2, 0.1, **cx)
    assert _spills(tmp_path, k, chip, rescale_under_s=True, spill_fallbacks=False) == 0
    b = cache.get_binary(k, _gpu(k, chip, rescale_under_s=True), directory=str(tmp_path))
    assert not b.manifest.get("given_up"), b.manifest["given_up"]
    default = cache.get_binary(k, _gpu(k, chip), directory=str(tmp_path))
    assert b.ptx != default.ptx


@pytest.mark.parametrize("D", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_bf16_rows_of_bshd_tensors_spill_nothing(tmp_path, D, causal):
    # The dense sm_90a kernels on bf16 [B, N, H, D] tensors read in place (the row and head
    # strides are constexprs: other addressing code, other conversions): 0 bytes and nothing
    # given up, as for fp16 [B, H, N, D] (twenty-ninth session's survey: sm_80 too, with
    # mods, whole key blocks or not).
    H, chip = 4, "sm_90a"
    x = np.zeros((1, N, H, D), np.uint16)
    lse = np.zeros((1, H, N), np.float32)
    rows = dict(Q_RS=H * D, Q_HS=D, K_RS=H * D, K_HS=D, V_RS=H * D, V_HS=D, O_RS=H * D, O_HS=D)
    for n in (1024, 4096):
        BM, BN = gpu_blocks(D, "bf16", n, n, chip, unmasked=not causal, causal=causal,
                            mods=False)
        cx = dict(D=D, BLOCK_M=BM, BLOCK_N=BN, CAUSAL=causal, SCORE_MOD=None, MASK_MOD=None,
                  **key_loop_constexprs(n, n, D, BM, BN, causal, None, None, chip), **rows)
        if (chip, BM, BN) in grid.PERSISTENT_BLOCKS:
            ids = np.zeros(8, np.int32)
            k = persistent_attention_kernel.warmup(x, x, x, x, lse, n, n, H, H, 0.1, 1, ids,
                                                   ids, **cx)
        else:
            k = attention_kernel.warmup(x, x, x, x, lse, n, n, H, H, 0.1, **cx)
        _check(chip, f"d{D} bf16 bshd", _spills(tmp_path, k, chip))
        b = cache.get_binary(k, _gpu(k, chip), directory=str(tmp_path))
        assert not b.manifest.get("given_up"), b.manifest["given_up"]


@pytest.mark.parametrize("chip,D", [("sm_90a", 64), ("sm_90a", 128), ("sm_90a", 192),
                                    ("sm_90a", 256),
                                    ("sm_80", 64), ("sm_80", 128)])
@pytest.mark.parametrize("name", ["document", "window softcap", "block table"])
def test_block_mask_forward_spills(tmp_path, chip, D, name):
    x = np.zeros((1, 2, N, D), np.float16)
    mask, score = {"document": (document, None), "window softcap": (window, softcap),
                   "block table": (block_table, None)}[name]
    bm = tessel.block_mask(mask, 1 if mask is document else None, None, N, N, BLOCK_M=128,
                           BLOCK_N=128)
    BM, BN = blocksparse.SPARSE_GPU_BLOCKS.get((chip, D)) or gpu_blocks(D, "f16", N, N, chip,
                                                                        mods=True)
    args, cx, _, _, _ = blocksparse.prepare(x, x, x, None, score, mask, False, bm, BM, BN, False)
    kernel = blocksparse.block_sparse_attention_kernel
    case = f"d{D} {name}"
    if chip == "sm_90a" and (BM, BN) == (128, 128):
        k = kernel.warmup(*args, **dict(cx, PERSISTENT=True))
        _check(chip, case, _spills(tmp_path, k, chip))
        _check(chip, case, _spills(tmp_path, k, chip, producer_once=True))
    else:
        k = kernel.warmup(*args, **cx)
        _check(chip, case, _spills(tmp_path, k, chip))
    b = cache.get_binary(k, _gpu(k, chip), directory=str(tmp_path))
    given_up = set(b.manifest.get("given_up", []))
    assert given_up <= GIVEN_UP.get((chip, case), set()), given_up
    if name == "document" and chip == "sm_90a" and (BM, BN) == (128, 128):
        # Its partial blocks' loop (a mask read from tensors) left synchronous beside the full
        # blocks' overlapped one: the overlap kept.
        assert "wgmma.wait_group.sync.aligned 1" in b.ptx


@pytest.mark.parametrize("chip,D", [("sm_90a", 96), ("sm_90a", 40), ("sm_80", 96)])
@pytest.mark.parametrize("name", ["document", "window softcap"])
def test_block_mask_forward_in_blocks_wider_than_the_head_dim(tmp_path, chip, D, name):
    # attention.BLOCK_HEAD_DIM_SPARSE's kernels: the block-sparse kernel at head dim D in blocks
    # of the padded head dim (DB), as blocksparse.prepare launches them (on sm_90a the
    # persistent kernel where its blocks are 128 x 128, with and without Q from the producer):
    # 0 spill, nothing given up.
    DB = 128 if D == 96 else 64
    x = np.zeros((1, 2, N, D), np.float16)
    mask, score = {"document": (document, None), "window softcap": (window, softcap)}[name]
    bm = tessel.block_mask(mask, 1 if mask is document else None, None, N, N, BLOCK_M=128,
                           BLOCK_N=128)
    BM, BN = blocksparse.SPARSE_GPU_BLOCKS.get((chip, DB)) or gpu_blocks(DB, "f16", N, N, chip,
                                                                         mods=True)
    args, cx, _, _, _ = blocksparse.prepare(x, x, x, None, score, mask, False, bm, BM, BN, False,
                                            block_dim=DB)
    assert cx["DB"] == DB
    kernel = blocksparse.block_sparse_attention_kernel
    case = f"d{D} in {DB} {name}"
    persistent = chip == "sm_90a" and (BM, BN) == (128, 128)
    k = kernel.warmup(*args, **dict(cx, PERSISTENT=persistent))
    _check(chip, case, _spills(tmp_path, k, chip))
    if persistent:
        _check(chip, case, _spills(tmp_path, k, chip, producer_once=True))
    b = cache.get_binary(k, _gpu(k, chip), directory=str(tmp_path))
    assert not b.manifest.get("given_up"), b.manifest["given_up"]
    assert ("wgmma.mma_async" if chip == "sm_90a" else "mma.sync.aligned") in b.ptx


SLOPES = np.array([2.0 ** (-8.0 * (i + 1) / 2) for i in range(2)], np.float32)
REL = (np.random.default_rng(1).standard_normal((2, 2 * N - 1)) * 0.5).astype(np.float32)


def causal_mask(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def alibi(score, b, h, q_idx, kv_idx):
    return score + SLOPES[h] * (kv_idx - q_idx)


def rel_bias(score, b, h, q_idx, kv_idx):
    return score + REL[h, q_idx - kv_idx + N - 1]


@pytest.mark.parametrize("name", ["alibi", "rel_bias"])
def test_block_mask_score_mods_spill_nothing(tmp_path, name):
    # The masks bench_block_mask.py measures beside FlexAttention with a score_mod (a separated
    # affine bias, a gathered relative bias) on the H200's 128x128 persistent kernel, with and
    # without Q from the producer: 0 bytes, after the spill fallback's compiles (7-8 of them,
    # docs/dev/cold-compile.md).
    x = np.zeros((1, 2, N, 128), np.float16)
    score = {"alibi": alibi, "rel_bias": rel_bias}[name]
    bm = tessel.block_mask(causal_mask, None, None, N, N, BLOCK_M=128, BLOCK_N=128)
    args, cx, _, _, _ = blocksparse.prepare(x, x, x, None, score, causal_mask, False, bm, 128,
                                            128, False)
    k = blocksparse.block_sparse_attention_kernel.warmup(*args, **dict(cx, PERSISTENT=True))
    _check("sm_90a", f"d128 {name}", _spills(tmp_path, k, "sm_90a"))
    _check("sm_90a", f"d128 {name}", _spills(tmp_path, k, "sm_90a", producer_once=True))


@pytest.mark.parametrize("chip,D", [("sm_90a", 64), ("sm_90a", 128), ("sm_90a", 192),
                                    ("sm_90a", 256),
                                    ("sm_80", 64), ("sm_80", 128), ("sm_80", 256)])
@pytest.mark.parametrize("name", ["softcap causal", "window", "softcap even"])
def test_dense_forward_with_mods_spills(tmp_path, chip, D, name):
    # The dense kernel (no block mask) with a score_mod, or a mask_mod the compile-time split
    # takes, at the blocks tessel.attention picks for a call with mods, with the key loop a call
    # at N keys takes; "softcap even": not causal, whole key blocks (EVEN_N, or the last key
    # block first at PEELED_BLOCKS: one key loop).
    x = np.zeros((1, 2, N, D), np.float16)
    lse = np.zeros((1, 2, N), np.float32)
    causal = name == "softcap causal"
    BM, BN = gpu_blocks(D, "f16", N, N, chip, unmasked=not causal and name != "window",
                        causal=causal, mods=True)
    mask_mod = tessel.jit(window) if name == "window" else None
    cx = dict(D=D, BLOCK_M=BM, BLOCK_N=BN, CAUSAL=causal,
              SCORE_MOD=None if name == "window" else tessel.jit(softcap), MASK_MOD=mask_mod,
              **key_loop_constexprs(N, N, D, BM, BN, causal, None, mask_mod, chip))
    k = attention_kernel.warmup(x, x, x, x, lse, N, N, 2, 2, 0.1, **cx)
    _check(chip, f"d{D} {name}", _spills(tmp_path, k, chip))


@pytest.mark.parametrize("D", [128, 256])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("mod", [None, "softcap", "window"])
def test_fp8_forward_spills(tmp_path, D, causal, mod):
    # FP8 (attention_fp8.py) at the blocks a call takes (FP8_BLOCKS, FP8_BLOCKS_MODS with a
    # mod): the persistent kernel, with and without Q from the producer, where those blocks
    # run persistent, and the one-program-a-tile kernel; none spills.
    from tessel import attention_fp8 as f8
    x = np.zeros((1, 2, N, D), np.uint8)
    o = np.zeros((1, 2, N, D), np.uint16)
    lse = np.zeros((1, 2, N), np.float32)
    ds = (np.ones(1, np.float32),) * 3 + (0,) * 6 + (0.1, 1.0)   # descales and their strides
    ids = np.zeros(8, np.int32)
    BM, BN = f8.FP8_BLOCKS_MODS.get(D, f8.FP8_BLOCKS[D]) if mod else f8.FP8_BLOCKS[D]
    # With whole key blocks too (EVEN_N), where a call takes that kernel.
    allowed = f8.even_keys_allowed(causal, tessel.jit(window) if mod == "window" else None)
    for even in (False, True)[:1 + allowed]:
        cx = dict(D=D, BLOCK_M=BM, BLOCK_N=BN, CAUSAL=causal,
                  SCORE_MOD=tessel.jit(softcap) if mod == "softcap" else None,
                  MASK_MOD=tessel.jit(window) if mod == "window" else None, OUT=tl.bfloat16,
                  EVEN_N=even)
        if ("sm_90a", BM, BN) in grid.PERSISTENT_BLOCKS:
            persistent = f8.fp8_persistent_kernel.warmup(x, x, x, o, lse, *ds, N, N, 2, 2, 2,
                                                         ids, ids, **cx)
            assert _spills(tmp_path, persistent, "sm_90a") == 0
            assert _spills(tmp_path, persistent, "sm_90a", producer_once=True) == 0
        one_a_tile = f8.fp8_attention_kernel.warmup(x, x, x, o, lse, *ds, N, N, 2, 2, **cx)
        assert _spills(tmp_path, one_a_tile, "sm_90a") == 0
        if even and D == 128:
            # One key loop, synchronous consumers: Q read by descriptor, not kept in registers
            # (ptxas 13.0 gave those to P: docs/dev/codegen-wgmma.md).
            b = cache.get_binary(one_a_tile, _gpu(one_a_tile, "sm_90a"), directory=str(tmp_path))
            assert "ldmatrix" not in b.ptx


@pytest.mark.parametrize("chip", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("D", [64, 128])
def test_serving_forward_spills(tmp_path, chip, D):
    # The serving kernels at their fast-path blocks (serving_checks._fast_blocks: 64x64):
    # varlen and the paged cache kernel, causal (the masked loop pair beside the full one);
    # also with FlashAttention's window and soft cap (serving._position_mods).
    from tessel.serving import _position_mods
    from tessel.serving_kernels import kvcache_kernel, varlen_kernel
    T, H, HKV = 4096, 8, 2
    q, kv = np.zeros((T, H, D), np.float16), np.zeros((T, HKV, D), np.float16)
    strides = dict(q_rs=H * D, q_hs=D, k_rs=HKV * D, k_hs=D, v_rs=HKV * D, v_hs=D)
    for mods in ({}, _position_mods("test", True, (1024, 0), 30.0, None)):
        cx = dict(strides, D=D, BLOCK_M=64, BLOCK_N=64, CAUSAL=True, **mods)
        cu = np.zeros(3, np.int32)
        varlen = varlen_kernel.warmup(q, kv, kv, q, np.zeros((H, T), np.float32), cu, cu, 2, T,
                                      T, H, HKV, 2048, 0.1, cu, 0, **cx)
        qd, rows = np.zeros((2, 64, H, D), np.float16), np.zeros((2, 2048, HKV, D), np.float16)
        paged = kvcache_kernel.warmup(qd, rows, rows, qd, np.zeros((2, H, 64), np.float32),
                                      np.zeros(2, np.int32), np.zeros((2, 128), np.int32), 2,
                                      64, 4096, H, HKV, 128, 0.1, np.zeros(2, np.int32),
                                      PAGE=16, **cx)
        assert _spills(tmp_path, varlen, chip) == 0
        assert _spills(tmp_path, paged, chip) == 0


def test_spilling_modules_keep_the_generic_scale(tmp_path):
    # The backward's causal key-rows program spills at d128 with or without the fold of a
    # moderate scale (tile.moderate) and ran 37 % slower with it on the H200: a module that
    # spills with the fold is compiled again generic, so a moderate scale gets the generic
    # kernel's PTX.
    from tessel.backward import attention_bwd_dkdv_keyrows
    x = np.zeros((1, 2, 256, 128), np.float16)
    row = np.zeros((1, 2, 256), np.float32)
    cx = dict(D=128, BLOCK_M=64, BLOCK_N=64, CAUSAL=True, SCORE_MOD=None, MASK_MOD=None)
    built = {}
    for scale in (0.088, -0.088):
        k = attention_bwd_dkdv_keyrows.warmup(x, x, x, x, row, row, x, x, x, 256, 256, 2, 2, 2,
                                              scale, **cx)
        assert ("tile.moderate" in k.asm["tile"]) == (scale > 0)
        try:
            cache.ptxas_version()
        except tessel.CompilationError as e:
            pytest.skip(str(e))
        built[scale] = cache.get_binary(k, cache.GpuOptions(chip="sm_90a"),
                                        directory=str(tmp_path))
    assert built[0.088].manifest["spill_bytes"] > 0
    assert built[0.088].ptx == built[-0.088].ptx
    assert "compile again (spills: no scale fold)" in [n for n, _ in built[0.088].timings]


@needs_ptxas()
@pytest.mark.parametrize("entry", sorted(__import__("tessel.backward").backward.NO_SPILL_SEARCH))
def test_keyrows_programs_that_spill_anyway_compile_once(tmp_path, entry):
    # backward.NO_SPILL_SEARCH: where the key-rows program spills with the scale fold, it is
    # compiled at once as the search would end (generic scale, its switches): the same PTX,
    # cubin and spill as the searched compile, in one compile. A search that ends elsewhere
    # fails here: the entry must change or go.
    from tessel.backward import _keyrows_program, attention_bwd_dkdv_keyrows
    chip, D, bm, bn, part, causal = entry
    x = np.zeros((1, 2, 256, D), np.float16)
    row = np.zeros((1, 2, 256), np.float32)
    cx = dict(D=D, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal, SCORE_MOD=None, MASK_MOD=None,
              **({"PART": part} if part else {}))
    once = _keyrows_program(chip, D, part, cx, False)
    assert once is not attention_bwd_dkdv_keyrows
    assert _keyrows_program(chip, D, part, dict(cx, SCORE_MOD=softcap), False) is \
        attention_bwd_dkdv_keyrows
    assert _keyrows_program(chip, D, part, cx, True) is attention_bwd_dkdv_keyrows
    assert _keyrows_program(chip, D, part, dict(cx, BLOCK_M=32), False) is \
        attention_bwd_dkdv_keyrows                 # other blocks: not measured, searched
    built = {}
    for program in (attention_bwd_dkdv_keyrows, once):
        k = program.warmup(x, x, x, x, row, row, x, x, x, 256, 256, 2, 2, 2, 0.088, **cx)
        assert ("tile.moderate" in k.asm["tile"]) == (program is attention_bwd_dkdv_keyrows)
        built[program] = cache.get_binary(k, _gpu(program, chip), directory=str(tmp_path))
    searched, direct = built[attention_bwd_dkdv_keyrows], built[once]
    assert "scale fold" in searched.manifest["given_up"]
    assert direct.manifest["spill_bytes"] == searched.manifest["spill_bytes"]
    assert (direct.ptx, direct.cubin) == (searched.ptx, searched.cubin)
    assert not [n for n, _ in direct.timings if n.startswith("compile again")]



@needs_ptxas()
@pytest.mark.parametrize("part", [0, 1])
def test_warp_specialized_programs_take_no_occupancy_hint(tmp_path, part):
    # attention_backward(..., block_n=128) at d64 on sm_90a: the key-rows program's 128 key
    # rows are two consumer warpgroups beside a producer that hands them its registers
    # (setmaxnreg), under the d64 occupancy allowance (KEYROWS_OCCUPANCY_SPILL). Asked for a
    # second CTA an SM, ptxas sized the launch for 80 registers and the consumers' growth to
    # 232 waited forever on an H100 (2026-12-06): such kernels get no .minnctapersm.
    from tessel.backward import KEYROWS_OCCUPANCY_SPILL, _keyrows_program
    assert KEYROWS_OCCUPANCY_SPILL.get(("sm_90a", 64))
    x = np.zeros((2, 4, 300, 64), np.float16)
    row = np.zeros((2, 4, 300), np.float32)
    cx = dict(D=64, BLOCK_M=64, BLOCK_N=128, CAUSAL=True, SCORE_MOD=None, MASK_MOD=None,
              **({"PART": part} if part else {}))
    program = _keyrows_program("sm_90a", 64, part, cx, False)
    k = program.warmup(x, x, x, x, row, row, x, x, x, 300, 333, 4, 2, 2, 0.125, **cx)
    b = cache.get_binary(k, _gpu(program, "sm_90a"), directory=str(tmp_path))
    assert "setmaxnreg.inc" in b.ptx and b.manifest["block"][0] == 384
    assert ".minnctapersm" not in b.ptx



@needs_ptxas()
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_native_192_backward_programs_spill_little(tmp_path, causal):
    # backward.NATIVE_BACKWARD_HEAD_DIMS' 192 (on): the sm_90a backward programs at d192 with
    # the fast paths' 64x64 blocks as _run launches them (the key-rows program split, as
    # SPLIT_KEYROWS lists 192): dQ and dV spill nothing, dK 0 bytes non-causal and at most 20
    # causal (the scale fold given up: NO_SPILL_SEARCH's entry).
    from tessel.backward import SPLIT_KEYROWS, _keyrows_program, attention_bwd_dq
    assert 192 in SPLIT_KEYROWS
    x = np.zeros((1, 2, 256, 192), np.float16)
    row = np.zeros((1, 2, 256), np.float32)
    cx = dict(D=192, BLOCK_M=64, BLOCK_N=64, CAUSAL=causal, SCORE_MOD=None, MASK_MOD=None)
    dq = attention_bwd_dq.warmup(x, x, x, x, row, row, x, 256, 256, 2, 2, 0.088, **cx)
    spilled = {"dq": _spills(tmp_path, dq, "sm_90a")}
    for part in (1, 2):
        program = _keyrows_program("sm_90a", 192, part, dict(cx, PART=part), False)
        k = program.warmup(x, x, x, x, row, row, x, x, x, 256, 256, 2, 2, 2, 0.088, PART=part,
                           **cx)
        spilled[part] = _spills(tmp_path, k, "sm_90a")
    assert spilled == {"dq": 0, 1: 0, 2: spilled[2]} and spilled[2] <= (20 if causal else 0)


def _sparse_backward_launches(D, DB):
    """[(program, args, constexprs)] blocksparse_backward.run launches for a document mask at
    head dim D (blocks DB wide where DB is given) with sm_90a's blocks, not run."""
    from tessel import backward, blocksparse_backward
    x = np.zeros((1, 2, N, D), np.float16)
    row = np.zeros((1, 2, N), np.float32)
    bm = tessel.block_mask(document, 1, None, N, N, BLOCK_M=128, BLOCK_N=128)
    launched = []
    W = DB or D
    blocksparse_backward.run(
        x, x, x, row, x, row, x, x, x, bm, 0.1, None, document, 64, 64,
        launch=lambda program, grid, *args, **cx: launched.append((program, args, cx)),
        dq_block_n=backward.FAST_DQ_BLOCKS_SM90.get(W, (0, None))[1], block_dim=DB)
    return launched


@needs_ptxas()
def test_block_head_dim_sparse_backward_programs(tmp_path):
    # attention.BLOCK_HEAD_DIM_SPARSE's backward: blocksparse_backward's dQ and dK/dV programs
    # at d96 in blocks 128 wide (DB), as run launches them for a document mask on sm_90a: the
    # fast paths, and no more spill than the d128 programs they stand beside.
    spills = {}
    for D, DB in ((96, 128), (128, 0)):
        launched = _sparse_backward_launches(D, DB)
        assert [cx.get("DB", 0) for _, _, cx in launched] == [DB] * len(launched)
        for program, args, cx in launched:
            b = cache.get_binary(program.warmup(*args, **cx), _gpu(program, "sm_90a"),
                                 directory=str(tmp_path))
            assert "wgmma.mma_async" in b.ptx
            spills.setdefault(D, []).append(b.manifest["spill_bytes"])
    assert all(a <= b for a, b in zip(spills[96], spills[128])), spills


def _backward_programs(chip, D, n, causal):
    """[(kernel, program)] of the dQ and key-rows programs at head dim D in blocks 128 wide
    (DB where D is not 128: backward.BLOCK_HEAD_DIM_CHIPS), warmed up on n rows as _run
    launches them on `chip` (the dQ program's sm_90a blocks, d128's NO_SPILL_SEARCH entry)."""
    from tessel.backward import FAST_DQ_BLOCKS_SM90, _keyrows_program, attention_bwd_dq
    x = np.zeros((1, 2, n, D), np.float16)
    row = np.zeros((1, 2, n), np.float32)
    cx = dict(D=D, BLOCK_M=64, BLOCK_N=64, CAUSAL=causal, SCORE_MOD=None, MASK_MOD=None,
              **({"DB": 128} if D != 128 else {}))
    bm, bn = FAST_DQ_BLOCKS_SM90.get(128, (64, 64)) if chip == "sm_90a" else (64, 64)
    dq = attention_bwd_dq.warmup(x, x, x, x, row, row, x, n, n, 2, 2, 0.1,
                                 **dict(cx, BLOCK_M=bm, BLOCK_N=bn))
    program = _keyrows_program(chip, 128, 0, cx, False)
    keyrows = program.warmup(x, x, x, x, row, row, x, x, x, n, n, 2, 2, 2, 0.1, **cx)
    return [(dq, attention_bwd_dq), (keyrows, program)]


@needs_ptxas()
@pytest.mark.parametrize("chip,D,causal", [("sm_90a", 96, False), ("sm_90a", 80, True),
                                           ("sm_80", 96, False)],
                         ids=["96-full", "80-causal", "sm80-96-full"])
def test_block_head_dim_backward_programs(tmp_path, chip, D, causal):
    # backward.BLOCK_HEAD_DIM_CHIPS' programs (head dim D in blocks 128 wide: DB) as _run
    # launches them (the dQ program's sm_90a blocks, the key-rows program with d128's
    # NO_SPILL_SEARCH entry): the fast paths; dQ spills nothing, the key-rows program no
    # more than the d128 program it stands beside (0 non-causal; the causal form's masked
    # loops spill at d128 too). With trim_zero_columns: fewer MMA instructions (Sᵀ's and dP's
    # k steps over D's columns), no more spill.
    op = "wgmma.mma_async" if chip == "sm_90a" else "mma.sync"
    built = {}
    for width in (D, 128):
        programs = _backward_programs(chip, width, 1024, causal)
        for trim in (False, True) if width != 128 else (False,):
            built[width, trim] = [
                cache.get_binary(k, _gpu(p, chip, trim_zero_columns=trim),
                                 directory=str(tmp_path)) for k, p in programs]
    for trim in (False, True):
        dq, kr = built[D, trim]
        assert dq.manifest["spill_bytes"] == 0 and op in dq.ptx and op in kr.ptx
        assert kr.manifest["spill_bytes"] <= built[128, False][1].manifest["spill_bytes"] or \
            kr.manifest["spill_bytes"] == 0, (trim, kr.manifest)
    for i in (0, 1):
        plain, trimmed = built[D, False][i], built[D, True][i]
        assert trimmed.ptx.count(op) < plain.ptx.count(op)
        assert trimmed.manifest["spill_bytes"] <= plain.manifest["spill_bytes"]


def _gathered_bias_kernel():
    """The d128 persistent block-sparse kernel of a causal mask with a gathered relative bias
    (rel_bias), which spills until its overlap goes (skips without ptxas)."""
    x = np.zeros((1, 2, N, 128), np.float16)
    bm = tessel.block_mask(causal_mask, None, None, N, N, BLOCK_M=128, BLOCK_N=128)
    args, cx, _, _, _ = blocksparse.prepare(x, x, x, None, rel_bias, causal_mask, False, bm, 128,
                                            128, False)
    k = blocksparse.block_sparse_attention_kernel.warmup(*args, **dict(cx, PERSISTENT=True))
    try:
        cache.ptxas_version()
    except tessel.CompilationError as e:
        pytest.skip(str(e))
    return k


def test_spill_fallbacks_give_back_what_the_last_made_unneeded(tmp_path, monkeypatch):
    # compileModule gives up, in order, TMA, the scale fold, the vector stores and the overlap
    # where a module spills; once nothing spills, what was given up before the last comes back
    # where it still does not spill. The d128 gathered bias's persistent kernel spills until
    # the overlap goes, and then takes its scale fold back (lib/Target/SpillFallbacks.cpp).
    k = _gathered_bias_kernel()
    monkeypatch.setattr(cache, "_memory", {})   # a compile here, not the one of a test before
    b = cache.get_binary(k, cache.GpuOptions(chip="sm_90a"), directory=str(tmp_path))
    laps = [n for n, _ in b.timings if n.startswith("compile again")]
    assert b.manifest["spill_bytes"] == 0
    assert "compile again (spills: no overlap-consumers)" in laps
    assert "overlap-consumers" in b.manifest["given_up"]
    assert "vector-stores" not in b.manifest["given_up"]
    assert "wgmma.wait_group.sync.aligned 1" not in b.ptx
    # The scale fold, given up before the overlap, comes back (the vector stores, which spilled
    # as much without, were never kept given up).
    assert "compile again (no spill: scale fold back)" in laps
    assert "scale fold" not in b.manifest["given_up"]
    assert "st.global.v4.b32" in b.ptx


def test_spill_fallbacks_run_ahead_with_the_same_result(tmp_path, monkeypatch):
    # The spill fallbacks' compiles run on TESSEL_COMPILE_THREADS threads, those the next
    # decisions may ask for started early (lib/Target/CompilesAhead.h); the search takes
    # every compile it asks for from there, and chooses, and makes, what it does one after the
    # other: the same PTX, cubin, steps and switches given up.
    k = _gathered_bias_kernel()
    built = {}
    for threads in ("1", "3"):
        monkeypatch.setenv("TESSEL_COMPILE_THREADS", threads)
        monkeypatch.setattr(cache, "_memory", {})
        built[threads] = cache.get_binary(k, cache.GpuOptions(chip="sm_90a"),
                                          directory=str(tmp_path / threads))
    one, three = built["1"], built["3"]
    assert (one.ptx, one.cubin) == (three.ptx, three.cubin)
    assert one.manifest["given_up"] == three.manifest["given_up"]
    assert one.manifest["spill_bytes"] == three.manifest["spill_bytes"] == 0

    def again(b):
        return [n for n, _ in b.timings if n.startswith("compile again")]
    assert len(again(one)) >= 3 and again(one) == again(three)
    assert not [n for n, _ in one.timings if n.startswith("compiles ahead")]
    ahead = [n for n, _ in three.timings if n.startswith("compiles ahead")]
    started, taken = map(int, re.fullmatch(r"compiles ahead: (\d+) started, (\d+) taken",
                                           ahead[0]).groups())
    assert taken == len(again(three)) and started >= taken


@needs_ptxas()
@pytest.mark.parametrize("D,Dv", [(192, 128), (128, 64)])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_value_head_dim_backward_programs(tmp_path, D, Dv, causal):
    # backward.VALUE_HEAD_DIM_BACKWARD_CHIPS: the sm_90a dQ and key-rows programs with v, dO and
    # dv Dv wide (DV; MLA's 192/128) as _run launches them, split at 192: no more spill than at
    # v of q's head dim (test_native_192_backward_programs_spill_little; d128 none non-causal).
    from tessel.backward import SPLIT_KEYROWS, _keyrows_program, attention_bwd_dq
    x, xv = np.zeros((1, 2, 256, D), np.float16), np.zeros((1, 2, 256, Dv), np.float16)
    row = np.zeros((1, 2, 256), np.float32)
    cx = dict(D=D, BLOCK_M=64, BLOCK_N=64, CAUSAL=causal, SCORE_MOD=None, MASK_MOD=None, DV=Dv)
    dq = attention_bwd_dq.warmup(x, x, xv, xv, row, row, x, 256, 256, 2, 2, 0.088, **cx)
    spilled = {"dq": _spills(tmp_path, dq, "sm_90a")}
    for part in ((1, 2) if D in SPLIT_KEYROWS else (0,)):
        program = _keyrows_program("sm_90a", D, part, dict(cx, PART=part), False)
        k = program.warmup(x, x, xv, xv, row, row, x, xv, x, 256, 256, 2, 2, 2, 0.088,
                           **({"PART": part} if part else {}), **cx)
        spilled[part] = _spills(tmp_path, k, "sm_90a")
    assert spilled["dq"] == 0 and all(n <= (20 if causal else 0) for n in spilled.values()), \
        spilled
