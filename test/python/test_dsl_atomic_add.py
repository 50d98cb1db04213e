"""tl.atomic_add (tile.atomic_add): tiles added into memory by many programs, out-of-bounds and
masked-off elements dropped; its errors at the user's line; each GPU lowering emits atomic adds
(compiled here, run on the H200 by test/gpu/test_tile_programs_gpu.py)."""
import re

import numpy as np
import pytest

from atomic_kernels import histogram, overlapping
from dsl_helpers import assert_located
import tessel
from tessel import language as tl
from tessel.cache import GpuOptions


def test_overlapping_programs_sum():
    x = np.random.default_rng(0).standard_normal((10, 8)).astype(np.float32)
    out = np.ones((10, 8), np.float32)
    overlapping[(10,)](x, out, 10, W=8, BLOCK=4)
    # Row r is added by programs max(0, r - 3) .. r: min(r + 1, 4) times.
    times = np.minimum(np.arange(10) + 1, 4)[:, None]
    np.testing.assert_allclose(out, 1 + times * x, rtol=1e-6, atol=1e-6)


def test_int32_counts_with_a_mask():
    keys = np.array([0, 3, 3, 9, -2, 1, 3, 0, 2], np.int32)
    counts = np.zeros(4, np.int32)
    histogram[(3,)](keys, counts, len(keys), 4, BLOCK=4)
    assert counts.tolist() == [2, 1, 1, 3]


@tessel.jit
def half_sums(x, out):
    xd = tl.make_desc(x, shape=(4,), strides=(1,))
    od = tl.make_desc(out, shape=(4,), strides=(1,))
    tl.atomic_add(od, (0,), tl.load(xd, (0,), shape=(4,)))  # L1


@tessel.jit
def mixed(x, out):
    xd = tl.make_desc(x, shape=(4,), strides=(1,))
    od = tl.make_desc(out, shape=(4,), strides=(1,))
    tl.atomic_add(od, (0,), tl.load(xd, (0,), shape=(4,)).to(tl.int32))  # L2


@pytest.mark.parametrize("kernel,dtype,tag,message", [
    (half_sums, np.float16, "L1", "tl.atomic_add: adds into f32 or i32 descriptors, not f16"),
    (half_sums, np.uint16, "L1", "tl.atomic_add: adds into f32 or i32 descriptors, not bf16"),
    (mixed, np.float32, "L2", "tl.atomic_add: a i32 tile into a f32 descriptor"),
])
def test_errors_are_located(kernel, dtype, tag, message):
    x = np.zeros(4, dtype)
    with pytest.raises(tessel.CompilationError) as info:
        kernel[(1,)](x, x.copy())
    assert_located(info.value, __file__, tag, "tl.atomic_add", message)


@tessel.jit
def gemm_add(a, b, c, M, K: tl.constexpr, BM: tl.constexpr, BK: tl.constexpr):
    """c[m0:m0+BM, :64] += a[m0:m0+BM, :] · b: one dot loop, the accumulator added."""
    m0 = tl.program_id(0) * BM
    ad = tl.make_desc(a, shape=(M, K), strides=(K, 1))
    bd = tl.make_desc(b, shape=(K, 64), strides=(64, 1))
    cd = tl.make_desc(c, shape=(M, 64), strides=(64, 1))
    acc = tl.zeros((BM, 64), tl.float32)
    for k in range(0, K, BK):
        acc += tl.dot(tl.load(ad, (m0, k), shape=(BM, BK)), tl.load(bd, (k, 0), shape=(BK, 64)))
    tl.atomic_add(cd, (m0, 0), acc)


@pytest.mark.parametrize("chip,codegen,marker", [
    ("sm_90a", "auto", "wgmma.mma_async"), ("sm_80", "auto", "mma.sync"),
    ("sm_90a", "reference", None)])
def test_every_lowering_adds_atomically(chip, codegen, marker):
    a = np.zeros((128, 256), np.float16)
    b = np.zeros((256, 64), np.float16)
    c = np.zeros((128, 64), np.float32)
    ptx = gemm_add.warmup(a, b, c, 128, K=256, BM=64, BK=64).binary(
        GpuOptions(chip=chip, codegen=codegen)).ptx
    assert marker is None or marker in ptx
    assert "atom.global.add.f32" in ptx
    assert not re.search(r"st\.global\.(v2\.)?f32", ptx)        # adds, never plain stores
    # A program without dots: under auto the blocked path, which adds with red.global.add.
    x = np.zeros((10, 8), np.float32)
    ptx = overlapping.warmup(x, x, 10, W=8, BLOCK=4).binary(
        GpuOptions(chip=chip, codegen=codegen)).ptx
    assert ("red.global.add.f32" if codegen == "auto" else "atom.global.add.f32") in ptx


def test_gemm_add_on_the_interpreter():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((100, 256)).astype(np.float16)
    b = rng.standard_normal((256, 64)).astype(np.float16)
    c = np.full((100, 64), 2.0, np.float32)
    gemm_add[(2,)](a, b, c, 100, K=256, BM=64, BK=64)
    ref = 2.0 + a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-3)
