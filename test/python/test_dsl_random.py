"""tl.randint4x, tl.randint, tl.rand (Philox4x32-10 in tile arithmetic): the published
known-answer vectors, a numpy Philox beside it on random seeds and offsets, Triton's float
mapping, the uniform distribution, the located refusals, and the GPU lowerings' compile."""
import numpy as np
import pytest

import dsl_helpers  # (also puts the built package on sys.path)
import tessel
from tessel import _tessel, cache
from tessel import language as tl

needs_interpreter = pytest.mark.skipif(not _tessel.has_interpreter,
                                       reason="this build has no interpreter")
M32 = np.uint64(0xFFFFFFFF)


def philox_reference(counters, key, rounds=10):
    """Philox4x32 in numpy (uint64 products): counters [4, n], key (k0, k1)."""
    c = [np.asarray(x, np.uint64) & M32 for x in counters]
    k0, k1 = np.uint64(key[0]) & M32, np.uint64(key[1]) & M32
    for _ in range(rounds):
        pa, pb = np.uint64(0xD2511F53) * c[0], np.uint64(0xCD9E8D57) * c[2]
        c = [((pb >> np.uint64(32)) ^ c[1] ^ k0) & M32, pb & M32,
             ((pa >> np.uint64(32)) ^ c[3] ^ k1) & M32, pa & M32]
        k0, k1 = (k0 + np.uint64(0x9E3779B9)) & M32, (k1 + np.uint64(0xBB67AE85)) & M32
    return [x.astype(np.uint32) for x in c]


def uniform_reference(bits):
    """tl.rand's floats of Philox words `bits` (uint32): Triton's mapping (int32 bits,
    negatives folded to -x - 1, times 2^-31), kept below 1.0."""
    s = bits.view(np.int32).astype(np.int64)
    s = np.where(s < 0, -s - 1, s).astype(np.float32)
    return np.minimum(s * np.float32(2.0 ** -31), np.float32(1 - 2.0 ** -24))


def test_the_reference_meets_the_published_vectors():
    # Random123's known-answer vectors for philox4x32-10 (counter words, key words -> output).
    for ctr, key, want in [
            ((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
            ((0xffffffff,) * 4, (0xffffffff,) * 2,
             (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
            ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
             (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1))]:
        got = philox_reference([[w] for w in ctr], key)
        assert [int(g[0]) for g in got] == list(want)


@tessel.jit
def bits(out, seed, base, N: tl.constexpr, SEED: tl.constexpr, ROUNDS: tl.constexpr):
    offs = base + tl.arange(0, N)
    s = seed if SEED is None else SEED
    a, b, c, d = tl.randint4x(s, offs, n_rounds=ROUNDS)
    od = tl.make_desc(out, shape=(4, N), strides=(N, 1))
    tl.store(od, (0, 0), a[None, :])
    tl.store(od, (1, 0), b[None, :])
    tl.store(od, (2, 0), c[None, :])
    tl.store(od, (3, 0), d[None, :])


def _run_bits(seed_arg, seed_const, base, n=256, rounds=10):
    out = np.zeros((4, n), np.int32)
    bits[(1,)](out, seed_arg, base, N=n, SEED=seed_const, ROUNDS=rounds)
    return out.view(np.uint32)


@needs_interpreter
@pytest.mark.parametrize("seed", [0, 1, 12345, 2**31 - 1, 2**31 + 5, 2**40 + 3, 2**64 - 1])
def test_randint4x_against_numpy_with_python_seeds(seed):
    base = 1 << 20
    got = _run_bits(0, seed, base)
    ctr = [np.arange(base, base + 256), np.zeros(256), np.zeros(256), np.zeros(256)]
    want = philox_reference(ctr, (seed & 0xFFFFFFFF, seed >> 32))
    np.testing.assert_array_equal(got, np.stack(want))


@needs_interpreter
@pytest.mark.parametrize("seed", [7, -3, -2**31])
@pytest.mark.parametrize("rounds", [10, 7])
def test_randint4x_with_a_runtime_seed_is_sign_extended(seed, rounds):
    # An int32 scalar seed: the key's high word is its sign, as Triton widens it.
    base = -100                            # counters wrap as uint32
    got = _run_bits(seed, None, base, rounds=rounds)
    ctr = [np.arange(base, base + 256) & 0xFFFFFFFF, np.zeros(256), np.zeros(256),
           np.zeros(256)]
    want = philox_reference(ctr, (seed & 0xFFFFFFFF, 0xFFFFFFFF if seed < 0 else 0), rounds)
    np.testing.assert_array_equal(got, np.stack(want))


@tessel.jit
def uniform(out, seed, N: tl.constexpr):
    od = tl.make_desc(out, shape=(tl.num_programs(0) * N,), strides=(1,))
    offs = tl.program_id(0) * N + tl.arange(0, N)
    tl.store(od, (tl.program_id(0) * N,), tl.rand(seed, offs))


@needs_interpreter
def test_rand_is_tritons_mapping_and_uniform():
    n, programs = 1024, 8
    out = np.zeros(n * programs, np.float32)
    uniform[(programs,)](out, 2024, N=n)
    x = philox_reference([np.arange(n * programs), np.zeros(n * programs),
                          np.zeros(n * programs), np.zeros(n * programs)], (2024, 0))[0]
    np.testing.assert_array_equal(out, uniform_reference(x))
    assert out.min() >= 0.0 and out.max() < 1.0
    # 8192 samples: each decile within 5 sigma of 819.2, the mean within 5 sigma of 1/2.
    counts = np.histogram(out, bins=10, range=(0.0, 1.0))[0]
    assert np.all(np.abs(counts - 819.2) < 5 * np.sqrt(819.2 * 0.9)), counts
    assert abs(out.mean() - 0.5) < 5 * np.sqrt(1 / 12 / out.size)


@tessel.jit
def normal(out, seed, N: tl.constexpr):
    od = tl.make_desc(out, shape=(N,), strides=(1,))
    tl.store(od, (0,), tl.randn(seed, tl.arange(0, N)))


@needs_interpreter
def test_randn_is_tritons_box_muller_and_normal():
    n = 16384
    out = np.zeros(n, np.float32)
    normal[(1,)](out, 99, N=n)
    w = philox_reference([np.arange(n), np.zeros(n), np.zeros(n), np.zeros(n)], (99, 0))
    u1 = np.maximum(uniform_reference(w[0]), np.float32(1e-7)).astype(np.float64)
    u2 = uniform_reference(w[1]).astype(np.float64)
    want = np.sqrt(-2 * np.log(u1)) * np.cos(2 * np.pi * u2)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=2e-6)
    assert abs(out.mean()) < 5 / np.sqrt(n) and abs(out.std() - 1) < 5 / np.sqrt(2 * n)


@tessel.jit
def bad_random(out, x, CASE: tl.constexpr):
    offs = tl.arange(0, 8)
    if CASE == "float seed":
        r = tl.randint(1.5, offs)  # float seed
    elif CASE == "tile seed":
        r = tl.randint(offs, offs)  # tile seed
    elif CASE == "float offsets":
        r = tl.randint(3, offs.to(tl.float32))  # float offsets
    elif CASE == "scalar offset":
        r = tl.randint(3, 5)  # scalar offset
    elif CASE == "rounds":
        r = tl.randint(3, offs, n_rounds=0)  # rounds
    else:
        r = tl.randint(2**64, offs)  # big seed
    tl.store(tl.make_desc(out, shape=(8,), strides=(1,)), (0,), r)


@pytest.mark.parametrize("case,message", [
    ("float seed", "the seed must be an integer of 64 bits or an int32 scalar"),
    ("tile seed", "the seed must be an int32 scalar, not a i32 tile"),
    ("float offsets", "the offsets must be an int32 tile, not f32 tile"),
    ("scalar offset", "tl.randint's offsets must be a tile"),
    ("rounds", "n_rounds must lie in [1, 64]"),
    ("big seed", "the seed must be an integer of 64 bits"),
])
def test_refusals_are_located(case, message):
    out = np.zeros(8, np.int32)
    with pytest.raises(tessel.CompilationError) as e:
        bad_random.warmup(out, out, CASE=case)
    dsl_helpers.assert_located(e.value, __file__, case, "tl.randint", message)


@dsl_helpers.needs_ptxas()
@pytest.mark.parametrize("chip", ["sm_80", "sm_90a"])
def test_random_kernels_compile_for_the_gpu(tmp_path, chip):
    # Integer tile arithmetic and tile.mulhiui: the row-blocked lowering takes them (codegen
    # auto), no spill.
    k = uniform.warmup(np.zeros(1024, np.float32), 5, N=1024)
    b = cache.get_binary(k, cache.GpuOptions(chip=chip), directory=str(tmp_path))
    assert b.manifest["spill_bytes"] == 0
    assert "mul.hi.u32" in b.ptx          # tile.mulhiui, one instruction
    # randn's cosine: one cos.approx.f32 (no libdevice in the kernels).
    k = normal.warmup(np.zeros(1024, np.float32), 5, N=1024)
    b = cache.get_binary(k, cache.GpuOptions(chip=chip), directory=str(tmp_path))
    assert b.manifest["spill_bytes"] == 0 and "cos.approx" in b.ptx


@tessel.jit
def dropout(x, y, seed, p, n_cols, BM: tl.constexpr, BN: tl.constexpr):
    # docs/dsl.md's example: a mask over a block of a matrix, one offset an element.
    r0, c0 = tl.program_id(0) * BM, tl.program_id(1) * BN
    d = tl.make_desc(x, shape=(BM * tl.num_programs(0), n_cols), strides=(n_cols, 1))
    e = tl.make_desc(y, shape=(BM * tl.num_programs(0), n_cols), strides=(n_cols, 1))
    t = tl.load(d, (r0, c0), shape=(BM, BN))
    offs = (r0 + tl.arange(0, BM))[:, None] * n_cols + (c0 + tl.arange(0, BN))[None, :]
    keep = tl.rand(seed, offs) >= p
    tl.store(e, (r0, c0), tl.where(keep, t / (1 - p), 0.0))


@needs_interpreter
def test_the_documented_dropout_draws_one_mask_per_seed():
    x = np.ones((64, 96), np.float32)
    y1, y2, y3 = (np.zeros_like(x) for _ in range(3))
    for y, seed in ((y1, 11), (y2, 11), (y3, 12)):
        dropout[(2, 3)](x, y, seed, 0.25, 96, BM=32, BN=32)
    np.testing.assert_array_equal(y1, y2)                  # the same seed, the same mask
    assert (y1 != y3).any()
    assert set(np.unique(y1)) <= {0.0, np.float32(1 / 0.75)}
    assert abs((y1 == 0).mean() - 0.25) < 5 * np.sqrt(0.25 * 0.75 / y1.size)


@dsl_helpers.needs_ptxas()
@pytest.mark.parametrize("chip", ["sm_80", "sm_90a"])
def test_a_random_mask_mod_takes_the_fast_paths(tmp_path, chip):
    # tl.rand inside a mask_mod: its Philox rounds in registers beside the tensor-core dots
    # (mma.sync / wgmma), one mul.hi.u32 per product, no spill.
    from tessel.attention import compile_attention

    def drop(b, h, q_idx, kv_idx):
        return tl.rand(7, q_idx * 4096 + kv_idx) >= 0.1
    x = np.zeros((1, 2, 1024, 128), np.float16)
    k = compile_attention(x, x, x, mask_mod=drop)
    b = cache.get_binary(k, cache.GpuOptions(chip=chip), directory=str(tmp_path))
    assert b.manifest["spill_bytes"] == 0 and "mul.hi.u32" in b.ptx
    assert ("wgmma.mma_async" if chip == "sm_90a" else "mma.sync") in b.ptx
