"""Split-KV decoding and GQA packing of tessel.attention_with_kvcache (serving_decode.py) on
the CPU interpreter, against the float64 reference one sequence at a time
(tessel.reference.reference_kvcache): MHA/GQA/MQA and groups that do not fill a block, causal or
not, contiguous and paged caches (pages in random order), lengths 0 to a few hundred, 1/2/3
splits and the heuristic. The GPU runs of the same path: test/gpu/test_serving_gpu.py."""
import numpy as np
import pytest

from dsl_helpers import BUILD  # noqa: F401  (puts the build's package on the path)

import tessel
from tessel import serving_decode
from tessel.reference import max_rel_error, reference_kvcache

TOL = {"float32": 2e-5, "float16": 2e-3, "bf16": 1.5e-2}
D = 16


def make_case(rng, B, Sq, H, Hkv, lengths, page, dtype="float32", D=D):
    """q [B, Sq, H, D] and a cache holding `lengths` keys per sequence: contiguous
    [B, S, Hkv, D], or pages [num_pages, page, Hkv, D] handed out in random order, with junk
    table entries past each sequence's pages and NaN in every cache row no sequence owns."""
    q = rng.standard_normal((B, Sq, H, D)).astype(np.float32)
    if page is None:
        S = max(lengths) + 3
        kc = rng.standard_normal((B, S, Hkv, D)).astype(np.float32)
        vc = rng.standard_normal((B, S, Hkv, D)).astype(np.float32)
        for b, n in enumerate(lengths):
            kc[b, n:] = vc[b, n:] = np.nan
        table = None
    else:
        max_pages = max(-(-n // page) for n in lengths) + 1
        num_pages = B * max_pages + 2
        kc = np.full((num_pages, page, Hkv, D), np.nan, np.float32)
        vc = np.full((num_pages, page, Hkv, D), np.nan, np.float32)
        table = rng.permutation(num_pages)[:B * max_pages].reshape(B, max_pages).astype(np.int32)
        for b, n in enumerate(lengths):
            for j in range(n):
                p, r = table[b, j // page], j % page
                kc[p, r] = rng.standard_normal((Hkv, D))
                vc[p, r] = rng.standard_normal((Hkv, D))
            used = -(-n // page)
            table[b, used:] = rng.integers(-5, 10**6, size=max_pages - used)
    if dtype == "float16":
        q, kc, vc = (x.astype(np.float16) for x in (q, kc, vc))
    elif dtype == "bf16":
        q, kc, vc = (tessel.to_bf16(x) for x in (q, kc, vc))
    return q, kc, vc, table


def as_f64(x, dtype):
    return tessel.from_bf16(x).astype(np.float64) if dtype == "bf16" else x.astype(np.float64)


def check(q, kc, vc, table, lengths, causal, dtype="float32", **kw):
    seqlens = np.array(lengths, dtype=np.int32)
    o, lse = tessel.attention_with_kvcache(q, kc, vc, seqlens, block_table=table, causal=causal,
                                           return_lse=True, **kw)
    B, Sq, H, _ = q.shape
    assert o.shape == q.shape and o.dtype == q.dtype and lse.shape == (B, H, Sq)
    ro, rl = reference_kvcache(*(as_f64(x, dtype) for x in (q, kc, vc)), seqlens, table,
                               causal=causal)
    of = as_f64(o, dtype)
    assert np.isfinite(of).all() and not np.isnan(lse).any()
    assert max_rel_error(of, ro) < TOL[dtype], max_rel_error(of, ro)
    finite = np.isfinite(rl)
    assert (np.isfinite(lse) == finite).all()
    assert (of[np.broadcast_to(~finite.transpose(0, 2, 1)[..., None], of.shape)] == 0).all()
    np.testing.assert_allclose(lse[finite], rl[finite], rtol=1e-5, atol=1e-5)
    return o, lse


# (Sq, H, Hkv): decode with MQA, GQA and MHA; a group of 3 (a block's rows do not divide it);
# Sq > 1 with G = 1 (positions read through q's row stride) and G > 1 (q packed first).
SHAPES = {"mqa": (1, 4, 1), "gqa": (1, 4, 2), "mha": (1, 2, 2), "gqa3-sq2": (2, 6, 2),
          "mha-sq3": (3, 2, 2), "gqa-sq3": (3, 4, 2)}
LENGTHS = [1, 0, 45, 130]     # an empty sequence; under causal with Sq > 1 a row that sees none


@pytest.mark.parametrize("splits", [1, 2, 3, None], ids=["s1", "s2", "s3", "heuristic"])
@pytest.mark.parametrize("page", [None, 16], ids=["contiguous", "paged16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_split_kv_matches_float64(shape, causal, page, splits):
    Sq, H, Hkv = SHAPES[shape]
    rng = np.random.default_rng(hash((shape, page)) % 2**32)
    q, kc, vc, table = make_case(rng, len(LENGTHS), Sq, H, Hkv, LENGTHS, page)
    check(q, kc, vc, table, LENGTHS, causal, num_splits=splits, block_n=16)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", ["mqa", "gqa3-sq2", "mha-sq3"])
def test_paged_caches_split_as_contiguous_ones(shape, causal, monkeypatch):
    # Pages of 4 blocks: the heuristic splits a paged cache as it splits a contiguous one, each
    # block's page looked up in the key loop; junk table entries past a sequence's pages are
    # never used.
    seen = []
    launch = serving_decode.launch
    monkeypatch.setattr(serving_decode, "launch",
                        lambda *a, **kw: (seen.append(kw), launch(*a, **kw))[1])
    monkeypatch.setattr(serving_decode, "MIN_KEYS_TO_SPLIT", 0)     # caches of a few pages
    Sq, H, Hkv = SHAPES[shape]
    rng = np.random.default_rng(21)
    q, kc, vc, table = make_case(rng, len(LENGTHS), Sq, H, Hkv, LENGTHS, 64)
    check(q, kc, vc, table, LENGTHS, causal, block_n=16)
    limit = table.shape[1] * 64
    G = H // Hkv
    assert seen[0]["n_splits"] == serving_decode.num_splits_heuristic(
        len(LENGTHS) * Hkv * -(-G * Sq // seen[0]["block_m"]), -(-limit // 16),
        serving_decode.DEFAULT_NUM_SMS) > 1


@pytest.mark.parametrize("dtype", ["float16", "bf16"])
@pytest.mark.parametrize("page", [None, 32], ids=["contiguous", "paged32"])
def test_split_kv_low_precision(dtype, page):
    rng = np.random.default_rng(7)
    lengths = [300, 17, 0]
    q, kc, vc, table = make_case(rng, 3, 1, 8, 2, lengths, page, dtype)
    check(q, kc, vc, table, lengths, True, dtype, num_splits=3)


def test_split_kv_long_and_default_blocks():
    # Default blocks (64-key blocks on the interpreter), a few hundred keys, splits that do not
    # divide the blocks, a group of 4 heads of 2 positions (packed q).
    rng = np.random.default_rng(11)
    lengths = [333, 64, 65]
    q, kc, vc, table = make_case(rng, 3, 2, 8, 2, lengths, 64)
    check(q, kc, vc, table, lengths, True, num_splits=3)


@pytest.mark.parametrize("splits", [7, np.int64(5), 40, 70],
                         ids=["int", "numpy-int", "40", "70"])
def test_more_splits_than_blocks(splits):
    # Splits past the keys read nothing: lse -inf, 0 output, merged away. Up to 64 splits the
    # combine is one [S, D] tile (splitkv_combine_tile); 70 take splitkv_combine's loop, 16
    # splits a load.
    rng = np.random.default_rng(12)
    q, kc, vc, table = make_case(rng, 2, 2, 2, 1, [5, 200], None)
    check(q, kc, vc, table, [5, 200], True, num_splits=splits, block_n=16)


def test_the_heuristic_splits_on_the_interpreter(monkeypatch):
    seen = []
    launch = serving_decode.launch
    monkeypatch.setattr(serving_decode, "launch",
                        lambda *a, **kw: (seen.append(kw["n_splits"]), launch(*a, **kw))[1])
    rng = np.random.default_rng(13)
    monkeypatch.setattr(serving_decode, "MIN_KEYS_TO_SPLIT", 0)   # a cache of 203 keys
    lengths = [200, 3]            # capacity 203 keys: 13 blocks of 16, 3 splits of >= 4 blocks
    q, kc, vc, table = make_case(rng, 2, 1, 4, 1, lengths, None)
    check(q, kc, vc, table, lengths, False, block_n=16)
    assert seen == [serving_decode.num_splits_heuristic(2, 13, serving_decode.DEFAULT_NUM_SMS)]
    assert seen[0] == 3


def test_prefill_like_queries_take_the_one_program_per_head_kernel(monkeypatch):
    monkeypatch.setattr(serving_decode, "launch", lambda *a, **kw: pytest.fail("split path"))
    rng = np.random.default_rng(14)
    q, kc, vc, table = make_case(rng, 1, 40, 4, 2, [50], None)     # G·Sq = 80 > 64 rows
    check(q, kc, vc, table, [50], True)
    check(q[:, :3], kc, vc, table, [50], True, num_splits=1)


@pytest.mark.parametrize("programs,blocks,sms,want", [
    (64, 32, 132, 4),       # issue 12's decode: b = 8, 8 KV heads; 4 · 64 = 256 of 264 slots
    (64, 2048, 132, 4),
    (64, 12, 132, 3),       # at least 4 blocks per split
    (64, 7, 132, 1),
    (256, 2048, 132, 1),    # the programs already fill the GPU
    (1, 4096, 132, 111),    # one sequence, one KV head: most of the 264 slots
    (8, 4096, 4, 1),        # 8 programs fill 4 SMs x 2
    (0, 100, 132, 1),
])
def test_num_splits_heuristic(programs, blocks, sms, want):
    n = serving_decode.num_splits_heuristic(programs, blocks, sms)
    assert n == want
    assert n == 1 or blocks // n >= serving_decode.MIN_BLOCKS_PER_SPLIT


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2", 10**6])
def test_num_splits_is_checked(bad):
    rng = np.random.default_rng(0)
    q, kc, vc, _ = make_case(rng, 1, 1, 2, 1, [4], None)
    with pytest.raises(ValueError, match="num_splits must be None"):
        tessel.attention_with_kvcache(q, kc, vc, np.array([4], np.int32), num_splits=bad)


def test_fast_blocks_of_varlen_and_the_cache_kernel():
    """varlen and the cache kernels take 64x64 on CUDA at f16/bf16, head dim 64/128 and strides
    of whole 16-byte chunks, whatever the page size (pages shorter than a key block are read
    row by row through a paged descriptor); else None (the reference lowering's blocks)."""
    from tessel.serving_checks import KVCACHE_FAST_HEAD_DIMS, _fast_blocks

    def fast(*a):
        return _fast_blocks(*a, KVCACHE_FAST_HEAD_DIMS)
    rows = (8 * 128, 128, 2 * 128, 128, 2 * 128, 128)        # q [.., 8, 128], k/v [.., 2, 128]
    assert fast("cuda", "f16", 128, rows) == (64, 64)
    assert fast("cuda", "bf16", 64, rows) == (64, 64)
    assert fast("cuda", "f16", 128, (3 * 8 * 128 + 4,) + rows[1:]) is None
    # The split program: its key loop at the cache's strides (q is packed first).
    assert fast("cuda", "f16", 128, rows[2:]) == (64, 64)
    assert fast("cuda", "f16", 128, ()) == (64, 64)
    assert fast("cuda", "f32", 128, rows) is None
    assert fast("numpy", "f16", 128, rows) is None
    assert fast("cuda", "f16", 96, rows) is None


def test_block_head_dim_of_the_cache(monkeypatch):
    """serving_checks.kvcache_block_head_dim: where KVCACHE_BLOCK_HEAD_DIM is on, a CUDA f16/bf16
    cache whose head dim the fast paths do not take, a multiple of 8, runs at the next one they
    take (the kernels' DB); else 0. On since its GPU check."""
    from tessel import serving_checks
    dims = (64, 128, 256)
    block = serving_checks.kvcache_block_head_dim
    assert serving_checks.KVCACHE_BLOCK_HEAD_DIM
    assert [block("cuda", "f16", d, dims) for d in (8, 40, 72, 80, 96, 160, 192, 248)] == \
        [64, 64, 128, 128, 128, 256, 256, 256]
    assert [block("cuda", "bf16", d, dims) for d in (64, 128, 256, 100, 260)] == [0] * 5
    assert block("cuda", "f32", 96, dims) == block("numpy", "f16", 96, dims) == 0
    assert block("cuda", "f16", 192, (64, 128)) == 0
    monkeypatch.setattr(serving_checks, "KVCACHE_BLOCK_HEAD_DIM", False)
    assert block("cuda", "f16", 96, dims) == 0


@pytest.mark.parametrize("splits", [1, 3, None], ids=["s1", "s3", "heuristic"])
@pytest.mark.parametrize("page", [None, 16], ids=["contiguous", "paged16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", ["gqa", "gqa3-sq2", "mha-sq3"])
def test_blocks_wider_than_the_cache(shape, causal, page, splits, monkeypatch):
    """The kernels' DB on the interpreter: a cache of head dim 24 read in blocks 32 wide (what a
    CUDA cache of head dim 96 gets at 128: serving_checks.kvcache_block_head_dim, forced here
    with the fast paths' blocks), columns past 24 read as 0 and o stored at 24 — the float64
    reference's answer, both kernels (one split and several) and the combine, NaN in the rows
    no sequence owns."""
    from tessel import serving, serving_checks
    seen = []
    launch = serving_decode.launch

    def spy(*a, **kw):
        seen.append(kw["block_dim"])
        return launch(*a, **kw)
    monkeypatch.setattr(serving_decode, "launch", spy)
    monkeypatch.setattr(serving_checks, "kvcache_block_head_dim", lambda *a: 32)
    monkeypatch.setattr(serving, "_fast_blocks", lambda *a: (16, 16))
    Sq, H, Hkv = SHAPES[shape]
    rng = np.random.default_rng(hash((shape, causal, page, splits)) % 2**32)
    q, kc, vc, table = make_case(rng, len(LENGTHS), Sq, H, Hkv, LENGTHS, page, D=24)
    check(q, kc, vc, table, LENGTHS, causal, num_splits=splits)
    assert seen in ([], [32]) and (seen or splits == 1)


@pytest.mark.parametrize("capacity,split", [(serving_decode.MIN_KEYS_TO_SPLIT - 1, False),
                                            (serving_decode.MIN_KEYS_TO_SPLIT, True)])
def test_short_caches_are_not_split(capacity, split, monkeypatch):
    """Below MIN_KEYS_TO_SPLIT keys of capacity the heuristic path runs one split (one program
    per batch and KV head, no workspace, no combine); from it on, the heuristic's count."""
    seen = []
    launch = serving_decode.launch
    monkeypatch.setattr(serving_decode, "launch",
                        lambda *a, **kw: (seen.append(kw["n_splits"]), launch(*a, **kw))[1])
    rng = np.random.default_rng(15)
    q, kc, vc, table = make_case(rng, 1, 1, 2, 1, [capacity - 3], None)    # S = length + 3
    check(q, kc, vc, table, [capacity - 3], False, block_n=64)
    want = serving_decode.num_splits_heuristic(1, capacity // 64 + (capacity % 64 > 0),
                                               serving_decode.DEFAULT_NUM_SMS) if split else 1
    assert seen == [want] and (want > 1) == split


@pytest.mark.parametrize("n_splits", [1, 3, 4, 13, 64])
def test_the_tile_combine_merges_as_the_loop_does(n_splits):
    """splitkv_combine_tile (one tile, no loop) against splitkv_combine (16 splits a load) and
    float64, on partials with -inf LSEs (splits that saw no key) and rows no split saw."""
    from tessel import language as tl
    from tessel.serving_kernels import splitkv_combine, splitkv_combine_tile
    rng = np.random.default_rng(n_splits)
    B, Sq, H, Hkv, Dm = 2, 3, 4, 2, 32
    R = H // Hkv * Sq
    part = rng.standard_normal((n_splits, B, Hkv, R, Dm)).astype(np.float32)
    lse = (rng.standard_normal((n_splits, B, Hkv, R)) * 4).astype(np.float32)
    lse[rng.random(lse.shape) < 0.3] = -np.inf
    lse[:, 1, 0, 2] = -np.inf                         # no split saw head 0, position 2
    part[lse == -np.inf] = 0.0                        # what splitkv_kernel writes there
    outs = []
    for kernel, cx in ((splitkv_combine_tile, dict(S=serving_decode.tile_combine_rows(n_splits))),
                       (splitkv_combine, dict(BLOCK_S=16))):
        o = np.full((B, Sq, H, Dm), np.nan, np.float32)
        lo = np.full((B, H, Sq), np.nan, np.float32)
        kernel[(Sq, B * H)](part, lse, o, lo, B, Sq, H, Hkv, n_splits, np.zeros(1, np.int32),
                            0, D=Dm, OUT=tl.float32, **cx)
        outs.append((o, lo))
    # float64: row (b, g, r) of the parts is head g·G + r // Sq at position r % Sq.
    m = np.max(lse, axis=0).astype(np.float64)
    m = np.where(np.isneginf(m), 0.0, m)
    w = np.exp(lse.astype(np.float64) - m)
    total = w.sum(axis=0)
    merged = np.einsum("sbgr,sbgrd->bgrd", w, part) / np.where(total > 0, total, 1)[..., None]
    with np.errstate(divide="ignore"):
        want_lse = m + np.log(total)
    G = H // Hkv
    want_o = merged.reshape(B, Hkv, G, Sq, Dm).transpose(0, 3, 1, 2, 4).reshape(B, Sq, H, Dm)
    want_l = want_lse.reshape(B, Hkv, G, Sq).reshape(B, H, Sq)
    for o, lo in outs:
        np.testing.assert_allclose(o, want_o, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(lo, want_l, rtol=1e-5, atol=1e-5)
    assert np.isneginf(outs[0][1][1, 0, 2]) and (outs[0][0][1, 2, 0] == 0).all()
