"""The serving kernels reach the GPU fast paths when asked for their blocks (compiled here, no
GPU needed): varlen and the contiguous KV cache with 64-row blocks compile with codegen=wgmma
on sm_90a and codegen=mma on sm_80, which refuse programs outside their class. The paged cache
loads at data-dependent rows inside the key loop (a page looked up per key block), which the
fast paths pipeline by reading the next block's page ahead of its copy. The split-KV decode
kernel takes them for a contiguous cache and for a paged one; pages shorter than a key block are
read through a paged descriptor (each row of a block looked up by its copy)."""

import numpy as np
import pytest

from dsl_helpers import needs_ptxas  # (it also puts the built package on sys.path)
import tessel
import tessel.cache
from tessel.serving_kernels import kvcache_kernel, splitkv_kernel, varlen_cache_kernel, \
    varlen_kernel

pytestmark = needs_ptxas()

D = 128
STRIDES = dict(q_rs=4 * D, q_hs=D, k_rs=2 * D, k_hs=D, v_rs=2 * D, v_hs=D)


def varlen(causal, d=D, **db):
    x, i32, lse = np.zeros((10, 4, d), np.float16), np.zeros(3, np.int32), np.zeros(1, np.float32)
    return varlen_kernel.warmup(x, x, x, x, lse, i32, i32, 2, 10, 10, 4, 2, 8, 0.1, i32, 0,
                                **strides(d), D=d, BLOCK_M=64, BLOCK_N=64, CAUSAL=causal, **db)


def strides(d):
    return dict(q_rs=4 * d, q_hs=d, k_rs=2 * d, k_hs=d, v_rs=2 * d, v_hs=d)


def kvcache(causal, page, d=D, **db):
    x, i32, lse = np.zeros((10, 4, d), np.float16), np.zeros((3, 3), np.int32), \
        np.zeros(1, np.float32)
    return kvcache_kernel.warmup(x, x, x, x, lse, i32, i32, 3, 64, 100, 4, 2, 3, 0.1, i32,
                                 **strides(d), D=d, BLOCK_M=64, BLOCK_N=64, PAGE=page,
                                 CAUSAL=causal, **db)


@pytest.mark.parametrize("chip,codegen", [("sm_90a", "wgmma"), ("sm_80", "mma")])
@pytest.mark.parametrize("make", [lambda: varlen(True), lambda: kvcache(True, 0)],
                         ids=["varlen", "contiguous-cache"])
def test_fast_paths_take_varlen_and_the_contiguous_cache(make, chip, codegen, tmp_path,
                                                         monkeypatch):
    monkeypatch.setenv("TESSEL_CACHE_DIR", str(tmp_path))
    assert make().binary(tessel.cache.GpuOptions(chip=chip, codegen=codegen)).cubin


@pytest.mark.parametrize("chip,codegen", [("sm_90a", "wgmma"), ("sm_80", "mma")])
@pytest.mark.parametrize("page", [64, 16, 24], ids=["block-per-page", "rows-p16", "rows-p24"])
def test_paged_cache_takes_the_fast_paths(page, chip, codegen, tmp_path, monkeypatch):
    # Pages of a whole number of key blocks: the block's page is read inside the loop
    # (table[b, j / page]), and the copies issued ahead read the next block's page first.
    # Shorter pages: a paged descriptor, each row of a 64-row block looked up by its copy.
    monkeypatch.setenv("TESSEL_CACHE_DIR", str(tmp_path))
    kernel = kvcache(False, page)
    assert kernel.binary(tessel.cache.GpuOptions(chip=chip, codegen=codegen)).cubin


def splitkv(page, block_n=64, d=D, **db):
    x, i32, f32 = np.zeros((10, 4, d), np.float16), np.zeros((3, 3), np.int32), \
        np.zeros(1, np.float32)
    return splitkv_kernel.warmup(x, x, x, f32, f32, i32, i32, 3, 1, 4, 100, 2, 3, 0.1, 4,
                                 4 * d, 4 * d, 0, 4 * 4 * d, 4 * d, 0, 8, 4, i32, i32[0], 7,
                                 QR=d, OR=d, k_rs=2 * d, k_hs=d, v_rs=2 * d, v_hs=d, D=d,
                                 BLOCK_M=64,
                                 BLOCK_N=block_n, PAGE=page, CAUSAL=True, DIRECT=False, **db)


@pytest.mark.parametrize("chip,codegen", [("sm_90a", "wgmma"), ("sm_80", "mma")])
@pytest.mark.parametrize("page", [0, 256, 64, 32, 16],
                         ids=["contiguous", "paged256", "paged64", "paged32", "paged16"])
def test_fast_paths_take_the_split_kv_kernel(page, chip, codegen, tmp_path, monkeypatch):
    # Pages of 16 and 32 rows: 64-row key blocks over several pages, each row looked up.
    monkeypatch.setenv("TESSEL_CACHE_DIR", str(tmp_path))
    kernel = splitkv(page)
    assert kernel.binary(tessel.cache.GpuOptions(chip=chip, codegen=codegen)).cubin


@pytest.mark.parametrize("chip,codegen", [("sm_90a", "wgmma"), ("sm_80", "mma")])
@pytest.mark.parametrize("page", [64, 16], ids=["paged64", "paged16"])
def test_varlen_decode_takes_the_fast_paths(page, chip, codegen, tmp_path, monkeypatch):
    # attention_varlen(block_table=) with one query a sequence: the split-KV program reading
    # sequence b's query at row cu_q[b] (VARLEN_Q); no spill.
    monkeypatch.setenv("TESSEL_CACHE_DIR", str(tmp_path))
    b = splitkv(page, VARLEN_Q=True).binary(tessel.cache.GpuOptions(chip=chip, codegen=codegen))
    assert b.cubin and b.manifest["spill_bytes"] == 0


@pytest.mark.parametrize("chip,codegen", [("sm_90a", "wgmma"), ("sm_80", "mma")])
@pytest.mark.parametrize("page", [0, 64], ids=["contiguous", "paged64"])
@pytest.mark.parametrize("kernel", ["kvcache", "split"])
def test_left_padding_takes_the_fast_paths(kernel, page, chip, codegen, tmp_path, monkeypatch):
    # cache_leftpad (LEFTPAD): the key loop from starts[b], rows not aligned with the blocks,
    # so paged caches look each row up (paged_views); no spill.
    monkeypatch.setenv("TESSEL_CACHE_DIR", str(tmp_path))
    k = splitkv(page, LEFTPAD=True) if kernel == "split" else kvcache(True, page, LEFTPAD=True)
    b = k.binary(tessel.cache.GpuOptions(chip=chip, codegen=codegen))
    assert b.cubin and b.manifest["spill_bytes"] == 0


@pytest.mark.parametrize("chip,codegen", [("sm_90a", "wgmma"), ("sm_80", "mma")])
@pytest.mark.parametrize("page", [64, 16], ids=["block-per-page", "rows-p16"])
@pytest.mark.parametrize("d", [128, 64, 256])
def test_varlen_against_a_paged_cache_takes_the_fast_paths(d, page, chip, codegen, tmp_path,
                                                          monkeypatch):
    # attention_varlen with block_table (varlen_cache_kernel): varlen's query side, the cache
    # kernel's key loop (cache_key_loop); no spill but the cache kernel's own at d256 with
    # pages shorter than a key block (KVCACHE_256_SPILL).
    monkeypatch.setenv("TESSEL_CACHE_DIR", str(tmp_path))
    x, i32, f32 = np.zeros((10, 4, d), np.float16), np.zeros((3, 3), np.int32), \
        np.zeros(1, np.float32)
    k = varlen_cache_kernel.warmup(x, x, x, x, f32, i32[0], i32[0], i32, 2, 10, 8, 300, 4, 2, 3,
                                   0.1, i32[0], 0, **strides(d), D=d, BLOCK_M=64, BLOCK_N=64,
                                   PAGE=page, CAUSAL=True)
    b = k.binary(tessel.cache.GpuOptions(chip=chip, codegen=codegen))
    known = KVCACHE_256_SPILL.get((chip, page), 0) if d == 256 else 0
    assert b.cubin and b.manifest["spill_bytes"] <= known, b.manifest["spill_bytes"]


@pytest.mark.parametrize("chip,codegen", [("sm_90a", "wgmma"), ("sm_80", "mma")])
@pytest.mark.parametrize("page", [64, 16], ids=["block-per-page", "rows-p16"])
def test_mixed_batch_without_its_decode_steps_takes_the_fast_paths(page, chip, codegen,
                                                                   tmp_path, monkeypatch):
    # A mixed batch's prefill chunks (varlen_cache_kernel's SKIP_SINGLE: its decode steps are
    # the split program's, VARLEN_Q above); no spill.
    monkeypatch.setenv("TESSEL_CACHE_DIR", str(tmp_path))
    x, i32, f32 = np.zeros((10, 4, D), np.float16), np.zeros((3, 3), np.int32), \
        np.zeros(1, np.float32)
    k = varlen_cache_kernel.warmup(x, x, x, x, f32, i32[0], i32[0], i32, 2, 10, 8, 300, 4, 2, 3,
                                   0.1, i32[0], 0, **strides(D), D=D, BLOCK_M=64, BLOCK_N=64,
                                   PAGE=page, CAUSAL=True, SKIP_SINGLE=True)
    b = k.binary(tessel.cache.GpuOptions(chip=chip, codegen=codegen))
    assert b.cubin and b.manifest["spill_bytes"] == 0


@pytest.mark.parametrize("chip,codegen", [("sm_90a", "wgmma"), ("sm_80", "mma")])
@pytest.mark.parametrize("per_batch", [False, True], ids=["slopes[H]", "slopes[B,H]"])
@pytest.mark.parametrize("kernel", ["varlen", "kvcache", "split"])
def test_fast_paths_take_alibi(kernel, per_batch, chip, codegen, tmp_path, monkeypatch):
    # alibi_slopes' mods (a gather of the row's head's slope, per query head; the split-KV
    # program's rows being several heads, a row vector of them) on the fast paths, no spill.
    from tessel.serving import _position_mods
    monkeypatch.setenv("TESSEL_CACHE_DIR", str(tmp_path))
    slopes = np.ones((3, 4) if per_batch else (4,), np.float32)
    mods = _position_mods("attention_with_kvcache", True, None, None, slopes,
                          np.zeros((3, 1, 4, D), np.float16), (3, 4))
    x, i32, f32 = np.zeros((10, 4, D), np.float16), np.zeros((3, 3), np.int32), \
        np.zeros(1, np.float32)
    if kernel == "split":
        k = splitkv_kernel.warmup(x, x, x, f32, f32, i32, i32, 3, 1, 4, 100, 2, 3, 0.1, 4, 4 * D,
                                  4 * D, 0, 4 * 4 * D, 4 * D, 0, 8, 4, i32, i32[0], 7, QR=D,
                                  OR=D,
                                  k_rs=2 * D,
                                  k_hs=D, v_rs=2 * D, v_hs=D, D=D, BLOCK_M=64, BLOCK_N=64,
                                  PAGE=0, CAUSAL=True, DIRECT=False, **mods)
    elif kernel == "kvcache":
        k = kvcache_kernel.warmup(x, x, x, x, f32, i32, i32, 3, 64, 100, 4, 2, 3, 0.1, i32,
                                  **STRIDES, D=D, BLOCK_M=64, BLOCK_N=64, PAGE=0, CAUSAL=True,
                                  **mods)
    else:
        k = varlen_kernel.warmup(x, x, x, x, f32, i32[0], i32[0], 2, 10, 10, 4, 2, 8, 0.1,
                                 i32[0], 0,
                                 **STRIDES, D=D, BLOCK_M=64, BLOCK_N=64, CAUSAL=True, **mods)
    b = k.binary(tessel.cache.GpuOptions(chip=chip, codegen=codegen))
    assert b.cubin and b.manifest["spill_bytes"] == 0


@pytest.mark.parametrize("chip,codegen,d", [("sm_90a", "wgmma", 256), ("sm_80", "mma", 256),
                                            ("sm_90a", "wgmma", 192)])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_varlen_at_head_dims_256_and_192_compile_clean(chip, codegen, d, causal, tmp_path,
                                                       monkeypatch):
    # serving_checks.VARLEN_FAST_HEAD_DIMS' 256 (on since its GPU check) and
    # VARLEN_NATIVE_HEAD_DIMS' sm_90a 192 (on since its GPU check): the varlen kernel with the
    # fast paths' 64x64 blocks compiles with nothing spilled or given up.
    monkeypatch.setenv("TESSEL_CACHE_DIR", str(tmp_path))
    x, i32, lse = np.zeros((10, 4, d), np.float16), np.zeros(3, np.int32), \
        np.zeros(1, np.float32)
    kernel = varlen_kernel.warmup(x, x, x, x, lse, i32, i32, 2, 10, 10, 4, 2, 8, 0.1, i32, 0,
                                  **strides(d), D=d, BLOCK_M=64, BLOCK_N=64, CAUSAL=causal)
    b = kernel.binary(tessel.cache.GpuOptions(chip=chip, codegen=codegen))
    assert b.manifest["spill_bytes"] == 0 and not b.manifest.get("given_up"), b.manifest


# The KV cache at head dim 256 (serving_checks.KVCACHE_FAST_HEAD_DIMS' 256, on since its GPU
# check), (chip, page) -> bytes of spill ptxas gives the one-program-a-head cache kernel
# today (CUDA 13.0): pages of 16 rows, each row looked up by its copy.
KVCACHE_256_SPILL = {("sm_90a", 16): 212, ("sm_80", 16): 16}


@pytest.mark.parametrize("chip,codegen", [("sm_90a", "wgmma"), ("sm_80", "mma")])
@pytest.mark.parametrize("page", [0, 64, 16], ids=["contiguous", "paged64", "paged16"])
@pytest.mark.parametrize("kernel", ["kvcache", "split"])
def test_kvcache_at_head_dim_256_compiles(kernel, page, chip, codegen, tmp_path, monkeypatch):
    # The decode kernels at Gemma's head dim with the fast paths' 64x64 blocks: the split-KV
    # program (decode's default) with nothing spilled or given up, the cache kernel with at
    # most KVCACHE_256_SPILL (where its pages of 16 also give the scale fold up).
    monkeypatch.setenv("TESSEL_CACHE_DIR", str(tmp_path))
    k = kvcache(True, page, d=256) if kernel == "kvcache" else splitkv(page, d=256)
    b = k.binary(tessel.cache.GpuOptions(chip=chip, codegen=codegen))
    known = KVCACHE_256_SPILL.get((chip, page), 0) if kernel == "kvcache" else 0
    assert b.cubin and b.manifest["spill_bytes"] <= known, b.manifest["spill_bytes"]
    if not known:
        assert not b.manifest.get("given_up"), b.manifest["given_up"]


@pytest.mark.parametrize("chip,codegen", [("sm_90a", "wgmma"), ("sm_80", "mma")])
@pytest.mark.parametrize("page", [16, 32, 7])
def test_kvcache_256_small_pages_at_64x32_spill_nothing(page, chip, codegen, tmp_path,
                                                        monkeypatch):
    # serving_checks.SMALL_PAGE_256_BLOCK_N's blocks: the cache kernel at d256 over pages that
    # 64 does not divide, 64x32: nothing spilled or given up (64x64 spills, KVCACHE_256_SPILL),
    # as the blocks cache_kernel_blocks picks with the switch on.
    from tessel import serving_checks
    monkeypatch.setenv("TESSEL_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(serving_checks, "SMALL_PAGE_256_BLOCK_N", 32)
    assert serving_checks.cache_kernel_blocks((64, 64), 256, page) == (64, 32)
    assert serving_checks.cache_kernel_blocks((64, 64), 256, 128) == (64, 64)
    x, i32, lse = np.zeros((10, 4, 256), np.float16), np.zeros((3, 3), np.int32), \
        np.zeros(1, np.float32)
    k = kvcache_kernel.warmup(x, x, x, x, lse, i32, i32, 3, 64, 100, 4, 2, 3, 0.1, i32,
                              **strides(256), D=256, BLOCK_M=64, BLOCK_N=32, PAGE=page,
                              CAUSAL=True)
    b = k.binary(tessel.cache.GpuOptions(chip=chip, codegen=codegen))
    assert b.cubin and b.manifest["spill_bytes"] == 0 and not b.manifest.get("given_up")


# Caches of other head dims in blocks of the next fast one (the kernels' DB, serving_checks.
# KVCACHE_BLOCK_HEAD_DIM): (d, DB, chip, page) -> bytes of spill ptxas gives the split-KV
# program (CUDA 13.0): at 256 with pages of 16 the columns' bounds cost 84 bytes on sm_90a (the
# scale fold given up) where d256 itself spills nothing; sm_80's cache kernel at d80 12 bytes
# since trim_zero_columns is on (S's 5 of 8 k steps; 0 with all 8), code no sm_80 has run.
BLOCK_DIM_SPILL = {(192, 256, "sm_90a", 16): 84, (80, 128, "sm_80", 0): 12}


@pytest.mark.parametrize("chip,codegen", [("sm_90a", "wgmma"), ("sm_80", "mma")])
@pytest.mark.parametrize("d,db,page,kernel", [(96, 128, 0, "split"), (96, 128, 16, "split"),
                                              (192, 256, 16, "split"), (80, 128, 0, "kvcache"),
                                              (96, 128, 0, "varlen"), (40, 64, 0, "varlen")],
                         ids=["d96-contiguous", "d96-paged16", "d192-paged16", "d80-kvcache",
                              "d96-varlen", "d40-varlen"])
def test_blocks_wider_than_the_cache_compile(d, db, page, kernel, chip, codegen, tmp_path,
                                             monkeypatch):
    # The decode and varlen kernels with blocks DB wide over head dim d take the fast paths
    # (wgmma, mma.sync: not the reference lowering) with at most BLOCK_DIM_SPILL.
    monkeypatch.setenv("TESSEL_CACHE_DIR", str(tmp_path))
    k = {"kvcache": lambda: kvcache(True, page, d=d, DB=db), "varlen": lambda: varlen(
        True, d=d, DB=db), "split": lambda: splitkv(page, d=d, DB=db)}[kernel]()
    b = k.binary(tessel.cache.GpuOptions(chip=chip, codegen=codegen))
    known = BLOCK_DIM_SPILL.get((d, db, chip, page), 0)
    assert b.cubin and b.manifest["spill_bytes"] <= known, b.manifest["spill_bytes"]
    assert ("wgmma.mma_async" if codegen == "wgmma" else "mma.sync") in b.ptx


@pytest.mark.parametrize("E,Ev", [(192, 128), (128, 64), (64, 128), (256, 128)])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_varlen_value_head_dim_kernel_compiles_clean(E, Ev, causal, tmp_path, monkeypatch):
    # serving_checks.VARLEN_VALUE_HEAD_DIM_KERNEL (on since its GPU check): the varlen kernel
    # with v of its own head dim (DV) at the fast paths' 64x64 blocks on sm_90a, nothing spilled
    # or given up.
    monkeypatch.setenv("TESSEL_CACHE_DIR", str(tmp_path))
    x, i32, lse = np.zeros((10, 4, E), np.float16), np.zeros(3, np.int32), \
        np.zeros(1, np.float32)
    kv, vv = np.zeros((10, 2, E), np.float16), np.zeros((10, 2, Ev), np.float16)
    o = np.zeros((10, 4, Ev), np.float16)
    kernel = varlen_kernel.warmup(x, kv, vv, o, lse, i32, i32, 2, 10, 10, 4, 2, 8, 0.1, i32, 0,
                                  q_rs=4 * E, q_hs=E, k_rs=2 * E, k_hs=E, v_rs=2 * Ev, v_hs=Ev,
                                  D=E, BLOCK_M=64, BLOCK_N=64, CAUSAL=causal, DV=Ev)
    b = kernel.binary(tessel.cache.GpuOptions(chip="sm_90a", codegen="wgmma"))
    assert b.manifest["spill_bytes"] == 0 and not b.manifest.get("given_up"), b.manifest


COMPACT_CASES = {  # (chip, codegen, head dim, BLOCK_M, page: 0 for varlen_kernel)
    "varlen-128x128": ("sm_90a", "wgmma", 128, 128, 0),
    "varlen-d256": ("sm_90a", "wgmma", 256, 128, 0),
    "varlen-d64": ("sm_90a", "wgmma", 64, 64, 0), "varlen-sm80": ("sm_80", "mma", 128, 64, 0),
    "cache-p16": ("sm_90a", "wgmma", 128, 64, 16), "cache-p16-sm80": ("sm_80", "mma", 128, 64, 16)}


@pytest.mark.parametrize("case", COMPACT_CASES.values(), ids=COMPACT_CASES.keys())
def test_compact_grid_compiles_clean(case, tmp_path, monkeypatch):
    # The varlen kernels' compact grid (TILES: each program's sequence from the map) at the
    # blocks their calls take (serving_checks.VARLEN_BLOCKS on sm_90a, 64x64 else; the mixed
    # batch's cache kernel over pages of 16): nothing spilled or given up.
    chip, codegen, d, bm, page = case
    monkeypatch.setenv("TESSEL_CACHE_DIR", str(tmp_path))
    x, i32, f32 = np.zeros((10, 4, d), np.float16), np.zeros((3, 3), np.int32), \
        np.zeros(1, np.float32)
    if page:
        k = varlen_cache_kernel.warmup(x, x, x, x, f32, i32[0], i32[0], i32, 2, 10, 8, 300, 4, 2,
                                       3, 0.1, i32[0], 7, **strides(d), D=d, BLOCK_M=64,
                                       BLOCK_N=64, PAGE=page, CAUSAL=True, SKIP_SINGLE=True,
                                       TILES=True)
    else:
        k = varlen_kernel.warmup(x, x, x, x, f32, i32[0], i32[0], 2, 10, 10, 4, 2, 8, 0.1,
                                 i32[0], 7, **strides(d), D=d, BLOCK_M=bm,
                                 BLOCK_N=64 if d == 256 else bm, CAUSAL=False, TILES=True)
    b = k.binary(tessel.cache.GpuOptions(chip=chip, codegen=codegen))
    assert b.cubin and b.manifest["spill_bytes"] == 0 and not b.manifest.get("given_up"), \
        b.manifest
