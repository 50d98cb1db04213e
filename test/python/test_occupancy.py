"""Occupancy hints (lib/Target/Occupancy.cpp): where a kernel's registers, not its shared memory,
cap its CTAs per SM and a few registers less would let one more in, the cubin is compiled again
with `.minnctapersm` and kept if nothing spills.

The d128 64×64 forward on sm_90a (64 KiB of shared memory: three CTAs an SM) took 171 registers
without the hint (two CTAs) and ran ~20 % slower on the H200
(docs/bench/2026-12-03-h200-occupancy.md). Needs ptxas (CUDA's toolkit), not a GPU."""
import re

import numpy as np
import pytest

from dsl_helpers import BUILD  # noqa: F401 (puts the build's package on the path)
import tessel
import tessel.language as tl
from tessel import cache


def _binary(tmp_path, D, causal, bm, bn, chip="sm_90a", nk=256):
    try:
        cache.ptxas_version()
    except tessel.CompilationError as e:
        pytest.skip(str(e))
    x = np.zeros((1, 2, 256, D), np.float16)
    kv = np.zeros((1, 2, nk, D), np.float16)
    k = tessel.compile_attention(x, kv, kv, causal=causal, block_m=bm, block_n=bn)
    return cache.get_binary(k, cache.GpuOptions(chip=chip), directory=str(tmp_path))


def test_registers_fit_the_ctas_the_shared_memory_allows(tmp_path):
    # 250 keys: the kernel with the key tail's masked loop (whole key blocks take one loop,
    # EVEN_N, which fits three CTAs unasked).
    b = _binary(tmp_path, 128, False, 64, 64, nk=250)
    assert b.dynamic_shared_bytes == 64 * 1024       # three CTAs of 64 KiB on a 228 KiB SM
    assert re.search(r"\.minnctapersm 3\n\{", b.ptx), "the hint precedes the body"
    regs = b.manifest["registers"]
    assert 0 < regs <= 168, regs                     # 65536 / (3 CTAs × 128 threads), by 8
    assert "ptxas again (occupancy)" in [name for name, _ in b.timings]
    even = _binary(tmp_path, 128, False, 64, 64)
    assert ".minnctapersm" not in even.ptx and 0 < even.manifest["registers"] <= 168


def test_bshd_rows_keep_the_occupancy(tmp_path):
    # d64 64x128 over [B, N, H, D] rows (2 KiB apart), the generic kernel (a negative scale: the
    # branch on it stays): 206 registers as ptxas first allocates them (two CTAs), 152 when
    # asked for the three its 64 KiB of shared memory allow. With a moderate scale (no branch)
    # ptxas allocates 168 unasked: three CTAs too.
    try:
        cache.ptxas_version()
    except tessel.CompilationError as e:
        pytest.skip(str(e))
    from tessel.attention import attention_kernel
    B, N, H, D = 2, 512, 16, 64
    x = np.zeros((B, N, H, D), np.float16)
    lse = np.zeros((B, H, N), np.float32)
    rows = dict(Q_RS=H * D, Q_HS=D, K_RS=H * D, K_HS=D, V_RS=H * D, V_HS=D, O_RS=H * D, O_HS=D)
    cx = dict(D=D, BLOCK_M=64, BLOCK_N=128, CAUSAL=False, SCORE_MOD=None, MASK_MOD=None, **rows)
    k = attention_kernel.warmup(x, x, x, x, lse, N, N, H, H, -0.125, **cx)
    b = cache.get_binary(k, cache.GpuOptions(chip="sm_90a"), directory=str(tmp_path))
    assert ".minnctapersm 3" in b.ptx and b.manifest["registers"] <= 168
    k = attention_kernel.warmup(x, x, x, x, lse, N, N, H, H, 0.125, **cx)
    b = cache.get_binary(k, cache.GpuOptions(chip="sm_90a"), directory=str(tmp_path))
    assert b.manifest["registers"] <= 168


def test_hints_can_be_turned_off(tmp_path):
    # GpuOptions(occupancy_hints=False): ptxas' first allocation, two CTAs an SM; its own key.
    try:
        cache.ptxas_version()
    except tessel.CompilationError as e:
        pytest.skip(str(e))
    x = np.zeros((1, 2, 256, 128), np.float16)
    kv = np.zeros((1, 2, 250, 128), np.float16)     # the key tail's masked loop, as above
    k = tessel.compile_attention(x, kv, kv, block_m=64, block_n=64)
    off = cache.GpuOptions(chip="sm_90a", occupancy_hints=False)
    b = cache.get_binary(k, off, directory=str(tmp_path))
    assert ".minnctapersm" not in b.ptx and b.manifest["registers"] > 168
    assert "ptxas again (occupancy)" not in [name for name, _ in b.timings]
    assert k.key(off) != k.key(cache.GpuOptions(chip="sm_90a"))
    assert k.key_ingredients(off)["options"]["target"].endswith(";no-occupancy-hints")
    with pytest.raises(TypeError, match="occupancy_hints must be a bool"):
        cache.GpuOptions(occupancy_hints=0)


def test_no_hint_where_the_shared_memory_is_the_bound(tmp_path):
    # d128 128x128: 128 KiB of shared memory, one CTA an SM whatever the registers.
    b = _binary(tmp_path, 128, False, 128, 128)
    assert ".minnctapersm" not in b.ptx


def test_no_hint_far_from_the_budget(tmp_path):
    # sm_80 d64 128x64: ~245 registers where three CTAs would leave 168; asking would spill.
    b = _binary(tmp_path, 64, False, 128, 64, chip="sm_80")
    assert ".minnctapersm" not in b.ptx
    assert b.manifest["registers"] > 200


def test_a_jit_kernel_can_turn_the_hints_off(tmp_path):
    # CompileOptions(occupancy_hints=False) (or kernel.with_options(...)) reaches GpuOptions,
    # hence the cache key and the compile.
    try:
        cache.ptxas_version()
    except tessel.CompilationError as e:
        pytest.skip(str(e))
    from tessel.attention import attention_kernel
    off = attention_kernel.with_options(occupancy_hints=False)
    assert off.options.gpu_options("sm_90a").occupancy_hints is False
    assert attention_kernel.options.gpu_options("sm_90a").occupancy_hints is True
    x = np.zeros((1, 2, 256, 128), np.float16)
    lse = np.zeros((1, 2, 256), np.float32)
    args = (x, x, x, x, lse, 256, 256, 2, 2, 0.1)
    cx = dict(D=128, BLOCK_M=64, BLOCK_N=64, CAUSAL=False, SCORE_MOD=None, MASK_MOD=None)
    k_on, k_off = attention_kernel.warmup(*args, **cx), off.warmup(*args, **cx)
    b_on = cache.get_binary(k_on, k_on.options.gpu_options("sm_90a"), directory=str(tmp_path))
    b_off = cache.get_binary(k_off, k_off.options.gpu_options("sm_90a"), directory=str(tmp_path))
    assert ".minnctapersm 3" in b_on.ptx and ".minnctapersm" not in b_off.ptx
    with pytest.raises(TypeError, match="occupancy_hints must be a bool"):
        tessel.CompileOptions(occupancy_hints="no")


def test_a_spill_allowance_buys_one_more_cta(tmp_path):
    # GpuOptions(occupancy_spill_bytes=N): the d64 non-causal backward's key-rows program
    # takes 176 registers (two CTAs an SM, 48 KiB of shared memory: four fit), and asked for
    # three CTAs' 168 it spills; with 64 bytes allowed it keeps that cubin.
    # backward.KEYROWS_OCCUPANCY_SPILL gives it that (the causal form, 255 registers then,
    # ran 25 % faster so on the H100: docs/bench/2026-12-05-h100-s33.md).
    try:
        cache.ptxas_version()
    except tessel.CompilationError as e:
        pytest.skip(str(e))
    from tessel import backward
    from tessel.backward import attention_bwd_dkdv_keyrows
    x = np.zeros((1, 2, 256, 64), np.float16)
    row = np.zeros((1, 2, 256), np.float32)
    cx = dict(D=64, BLOCK_M=64, BLOCK_N=64, CAUSAL=False, SCORE_MOD=None, MASK_MOD=None)
    k = attention_bwd_dkdv_keyrows.warmup(x, x, x, x, row, row, x, x, x, 256, 256, 2, 2, 2, 0.125,
                                         **cx)
    plain = cache.get_binary(k, cache.GpuOptions(chip="sm_90a"), directory=str(tmp_path))
    assert ".minnctapersm" not in plain.ptx and plain.manifest["registers"] > 168
    allowed = cache.GpuOptions(chip="sm_90a", occupancy_spill_bytes=64)
    hinted = cache.get_binary(k, allowed, directory=str(tmp_path))
    assert re.search(r"\.minnctapersm 3\n\{", hinted.ptx)
    assert hinted.manifest["registers"] <= 168 and 0 < hinted.manifest["spill_bytes"]
    assert k.key_ingredients(allowed)["options"]["target"].endswith(";occupancy-spill-bytes=64")
    # Too little allowed: the first cubin stays.
    tight = cache.get_binary(k, cache.GpuOptions(chip="sm_90a", occupancy_spill_bytes=8),
                             directory=str(tmp_path))
    assert tight.cubin == plain.cubin
    program = backward._keyrows_program("sm_90a", 64, 0, cx, False)
    assert program.options.gpu_options("sm_90a").occupancy_spill_bytes == 64
    assert backward._keyrows_program(None, 64, 0, cx, False) is attention_bwd_dkdv_keyrows
    for bad in (-1, 2000, True, 1.5):
        with pytest.raises(ValueError, match="occupancy_spill_bytes"):
            cache.GpuOptions(occupancy_spill_bytes=bad)
        with pytest.raises(ValueError, match="occupancy_spill_bytes"):
            tessel.CompileOptions(occupancy_spill_bytes=bad)


REL = np.random.default_rng(0).standard_normal((2, 2 * 256 - 1)).astype(np.float32)


def causal_mask(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def rel_bias(score, b, h, q_idx, kv_idx):
    return score + REL[h, q_idx - kv_idx + 255]


def softcap(score, b, h, q_idx, kv_idx):
    return 30.0 * tl.tanh(score / 30.0)


def test_overlapped_consumers_that_spill_are_compiled_again_without(tmp_path):
    # A relative-position bias gathered per element keeps too many values live beside the
    # overlapped schedule's S, O and P (84 bytes of spill with CUDA 13.0's ptxas): the module
    # is compiled again without tilegpu-overlap-consumers and that cubin, spilling nothing,
    # kept. A softcap fits, and keeps the overlap.
    try:
        cache.ptxas_version()
    except tessel.CompilationError as e:
        pytest.skip(str(e))
    N = REL.shape[1] // 2 + 1
    x = np.zeros((1, 2, N, 128), np.float16)
    bm = tessel.block_mask(causal_mask, 1, None, N, N, BLOCK_M=128, BLOCK_N=128)
    for mod, overlapped in ((rel_bias, False), (softcap, True)):
        k = tessel.compile_attention(x, x, x, score_mod=mod, mask_mod=causal_mask, block_mask=bm,
                                     block_m=128, block_n=128)
        b = cache.get_binary(k, cache.GpuOptions(chip="sm_90a"), directory=str(tmp_path))
        assert b.manifest["spill_bytes"] == 0
        assert ("wgmma.wait_group.sync.aligned 1;" in b.ptx) == overlapped
        steps = [name for name, _ in b.timings]
        assert ("compile again (spills: no overlap-consumers)" in steps) == (not overlapped)
