"""tessel.attention_varlen and tessel.attention_with_kvcache on the CPU interpreter, against a
float64 numpy reference computed one sequence at a time (tessel.reference), and their errors.
GPU runs of the same entry points: test/gpu/test_serving_gpu.py."""
import numpy as np
import pytest

from dsl_helpers import BUILD  # noqa: F401  (puts the build's package on the path)

import tessel
from tessel.reference import max_rel_error, reference_kvcache, reference_varlen

TOL = 2e-5     # float32 inputs: the interpreter accumulates in f32


def cu(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)


def packed(rng, total, heads, D, dtype=np.float32):
    return rng.standard_normal((total, heads, D)).astype(dtype)


def assert_matches(o, lse, ro, rl):
    """o within TOL of the float64 reference ro; lse finite exactly where rl is, and close."""
    assert max_rel_error(o, ro) < TOL
    finite = np.isfinite(rl)
    assert (np.isfinite(lse) == finite).all()
    np.testing.assert_allclose(lse[finite], rl[finite], rtol=1e-5, atol=1e-5)


def run_varlen(lq, lk, H, Hkv, D, causal, seed=0, scale=None, blocks=(None, None)):
    rng = np.random.default_rng(seed)
    q = packed(rng, sum(lq), H, D)
    k, v = packed(rng, sum(lk), Hkv, D), packed(rng, sum(lk), Hkv, D)
    cq, ck = cu(lq), cu(lk)
    o, lse = tessel.attention_varlen(q, k, v, cq, ck, max(lq), max(lk), causal=causal,
                                     scale=scale, return_lse=True, block_m=blocks[0],
                                     block_n=blocks[1])
    ro, rl = reference_varlen(q, k, v, cq, ck, scale=scale, causal=causal)
    assert o.shape == q.shape and o.dtype == q.dtype and lse.shape == (H, sum(lq))
    assert_matches(o, lse, ro, rl)
    return o


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("H,Hkv", [(2, 2), (4, 2), (3, 1)], ids=["mha", "gqa", "mqa"])
def test_varlen_matches_float64_per_sequence(causal, H, Hkv):
    # Lengths 1 to 100, some not multiples of the block, a query side shorter than the keys
    # (bottom-right causal), one longer (its first rows see no key under causal).
    run_varlen([1, 37, 100, 16], [5, 37, 71, 9], H, Hkv, 16, causal, seed=H + Hkv)


@pytest.mark.parametrize("blocks", [(16, 32), (32, 16)])
def test_varlen_other_blocks(blocks):
    run_varlen([3, 50, 33], [40, 17, 65], 2, 1, 16, True, seed=9, blocks=blocks)


def _tile_of(tiles, cu_q, p, BM):
    """The (sequence, block) varlen_program gives program p of the compact grid."""
    B = len(cu_q) - 1
    b = min(max(int(tiles[p]) - 1, 0), B - 1)
    j = p - max(int(cu_q[b]), 0) // BM - b
    return b, (j if j >= 0 else len(tiles))


@pytest.mark.parametrize("BM", [1, 16, 64])
def test_varlen_tiles_cover_every_block_once(BM):
    # The compact grid's map: each sequence's blocks [0, ceil(nq / BM)) come from exactly one
    # program each; the other programs (at most one a sequence) fall past their sequence.
    rng = np.random.default_rng(BM)
    for _ in range(20):
        lq = rng.integers(0, 3 * BM + 2, size=rng.integers(1, 12))
        lq[rng.integers(0, len(lq))] = 5 * BM + 1             # one long sequence
        cq = cu(lq)
        n = int(cq[-1]) // BM + len(lq)
        tiles = tessel.serving_checks.varlen_tile_map("numpy", cq, len(lq), BM, n)
        assert tiles.shape == (n,) and tiles.dtype == np.int32
        got = [_tile_of(tiles, cq, p, BM) for p in range(n)]
        real = [(b, j) for b, j in got if j * BM < lq[b]]
        assert sorted(real) == [(b, j) for b in range(len(lq))
                                for j in range(-(-int(lq[b]) // BM))]
        assert n - len(real) <= len(lq)


def test_varlen_tile_map_on_torch_tensors():
    # The map CUDA calls build with torch ops (here on CPU tensors) equals numpy's.
    torch = pytest.importorskip("torch")
    for lq, BM in (([0, 5, 300, 1, 1, 64, 0], 64), ([7], 16), ([3, 0, 0, 129], 128)):
        cq = cu(lq)
        n = int(cq[-1]) // BM + len(lq)
        got = tessel.serving_checks.varlen_tile_map("cuda", torch.from_numpy(cq), len(lq), BM, n)
        assert got.dtype == torch.int32
        assert np.array_equal(got.numpy(),
                              tessel.serving_checks.varlen_tile_map("numpy", cq, len(lq), BM, n))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("window", [None, (7, 0)], ids=["", "window"])
def test_varlen_seqused_k(causal, window):
    # FlashAttention-3's seqused_k over packed k and v: each sequence's first n_b rows of its
    # span are its keys (causal and the window aligned to them); none, some or all of the span,
    # GQA, rows of k past the last span, both grids (the compact one for the long sequence).
    lq, lk, used = [5, 17, 0, 30, 90], [9, 20, 4, 33, 70], [7, 20, 2, 0, 41]
    rng = np.random.default_rng(5)
    q = packed(rng, sum(lq) + 2, 4, 16)
    k, v = packed(rng, sum(lk) + 3, 2, 16), packed(rng, sum(lk) + 3, 2, 16)
    u = np.array(used, np.int32)
    o, lse = tessel.attention_varlen(q, k, v, cu(lq), cu(lk), max(lq), max(lk), causal=causal,
                                     window_size=window, return_lse=True, seqused_k=u,
                                     block_m=16, block_n=16)
    ro, rl = reference_varlen(q, k, v, cu(lq), cu(lk), causal=causal, window=window,
                              seqused_k=u)
    n = sum(lq)
    assert_matches(o[:n], lse[:, :n], ro[:n], rl[:, :n])
    # Keys past a sequence's count are not read: changing them changes nothing.
    k2, v2 = k.copy(), v.copy()
    for b, (a, m) in enumerate(zip(cu(lk)[:-1], used)):
        k2[a + m:cu(lk)[b + 1]] = 1e4
        v2[a + m:cu(lk)[b + 1]] = -1e4
    o2 = tessel.attention_varlen(q, k2, v2, cu(lq), cu(lk), max(lq), max(lk), causal=causal,
                                 window_size=window, seqused_k=u, block_m=16, block_n=16)
    assert np.array_equal(o2[:n], o[:n])


def test_varlen_seqused_k_is_checked():
    q, k, v, cq, ck = varlen_inputs()
    call = tessel.attention_varlen
    with pytest.raises(ValueError, match=r"seqused_k\[1\] = 8 keys, but sequence 1 spans 7"):
        call(q, k, v, cq, ck, 6, 7, seqused_k=np.array([5, 8], np.int32))
    with pytest.raises(ValueError, match=r"seqused_k\[0\] = -1 keys"):
        call(q, k, v, cq, ck, 6, 7, seqused_k=np.array([-1, 2], np.int32))
    with pytest.raises(ValueError, match="seqused_k has 3 entries for 2 sequences"):
        call(q, k, v, cq, ck, 6, 7, seqused_k=np.array([1, 2, 3], np.int32))
    with pytest.raises(TypeError, match="seqused_k must be int32, got int64"):
        call(q, k, v, cq, ck, 6, 7, seqused_k=np.array([1, 2]))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_varlen_compact_grid(causal, monkeypatch):
    # A long sequence beside short ones and empty ones: the compact grid (TILES) launches
    # total_q // BM + B programs a head instead of B times the long one's blocks, with the
    # same bits as the full grid.
    from tessel import serving
    lq, lk = [150, 1, 3, 0, 17, 1, 32, 33], [160, 9, 3, 4, 17, 40, 32, 1]
    rng = np.random.default_rng(3)
    q = packed(rng, sum(lq), 4, 16)
    k, v = packed(rng, sum(lk), 2, 16), packed(rng, sum(lk), 2, 16)
    launched, launch = [], serving._launch
    monkeypatch.setattr(serving, "_launch", lambda f, grid, args, cx: launched.append(
        (grid, cx.get("TILES"))) or launch(f, grid, args, cx))
    outs = []
    for on in (True, False):
        monkeypatch.setattr(tessel.serving_checks, "VARLEN_TILES", on)
        outs.append(tessel.attention_varlen(q, k, v, cu(lq), cu(lk), max(lq), max(lk),
                                            causal=causal, return_lse=True, block_m=16,
                                            block_n=16))
    assert launched == [((sum(lq) // 16 + 8, 4, 1), True), ((10, 32, 1), None)], launched
    for a, b in zip(*outs):
        assert np.array_equal(a, b)
    assert_matches(*outs[0], *reference_varlen(q, k, v, cu(lq), cu(lk), causal=causal))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_varlen_blocks_wider_than_the_head_dim(causal, monkeypatch):
    # The varlen kernel's DB on the interpreter: head dim 24 read in blocks 32 wide (what a CUDA
    # call at 96 gets at 128 under serving_checks.VARLEN_BLOCK_HEAD_DIM, forced here): columns
    # past 24 read as 0, o stored at 24, nothing padded on the host.
    from tessel import serving
    launched = []
    launch = serving._launch

    def spy(kernel, grid, args, cx):
        launched.append(cx.get("DB"))
        return launch(kernel, grid, args, cx)
    monkeypatch.setattr(serving, "_launch", spy)
    monkeypatch.setattr(serving, "_varlen_padded_dim", lambda q, k, v: 32)
    monkeypatch.setattr(serving, "_varlen_block_dim", lambda q, k, v, Dp: True)
    monkeypatch.setattr(serving, "_pad_columns", lambda *a: pytest.fail("padded"))
    run_varlen([1, 37, 100, 16], [5, 37, 71, 9], 4, 2, 24, causal, seed=3)
    assert launched == [32]


def test_varlen_empty_sequences_and_scale():
    o = run_varlen([0, 20, 3], [4, 0, 30], 2, 1, 8, causal=True, seed=5, scale=0.3)
    assert (o[0:20] == 0).all()        # sequence 1 has no keys: its rows are 0


def test_varlen_reads_a_slice_of_packed_qkv():
    # q, k, v as views of one [total, 3, H, D] array: read through their strides.
    rng = np.random.default_rng(1)
    qkv = rng.standard_normal((50, 3, 2, 16)).astype(np.float32)
    lengths = cu([20, 30])
    q, k, v = qkv[:, 0], qkv[:, 1], qkv[:, 2]
    o = tessel.attention_varlen(q, k, v, lengths, lengths, 30, 30, causal=True)
    ro, _ = reference_varlen(q, k, v, lengths, lengths, causal=True)
    assert max_rel_error(o, ro) < TOL


def test_varlen_float16():
    rng = np.random.default_rng(2)
    lq = [7, 33]
    q, k, v = (packed(rng, sum(lq), 2, 16, np.float16) for _ in range(3))
    o = tessel.attention_varlen(q, k, v, cu(lq), cu(lq), 33, 33, causal=True)
    ro, _ = reference_varlen(q, k, v, cu(lq), cu(lq), causal=True)
    assert o.dtype == np.float16 and max_rel_error(o, ro) < 2e-3


def cache_case(rng, B, Sq, H, Hkv, D, lengths, page=None, num_pages=None):
    q = rng.standard_normal((B, Sq, H, D)).astype(np.float32)
    if page is None:
        S = max(lengths) + 3
        kc = rng.standard_normal((B, S, Hkv, D)).astype(np.float32)
        vc = rng.standard_normal((B, S, Hkv, D)).astype(np.float32)
        return q, kc, vc, None
    max_pages = max(-(-n // page) for n in lengths) + 1
    num_pages = num_pages or B * max_pages + 2
    kc = rng.standard_normal((num_pages, page, Hkv, D)).astype(np.float32)
    vc = rng.standard_normal((num_pages, page, Hkv, D)).astype(np.float32)
    # Pages in random order; entries past a sequence's last page hold junk (never read).
    order = rng.permutation(num_pages)[:B * max_pages].reshape(B, max_pages).astype(np.int32)
    for b, n in enumerate(lengths):
        order[b, -(-n // page):] = rng.integers(-5, 10**6, size=max_pages - (-(-n // page)))
    return q, kc, vc, order


@pytest.mark.parametrize("page", [None, 16, 32, 48, 1, 7, 24],
                         ids=["contiguous", "p16", "p32", "p48", "p1", "p7", "p24"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("Sq,H,Hkv", [(1, 4, 1), (5, 4, 2)], ids=["decode-mqa", "sq5-gqa"])
def test_kvcache_matches_float64_per_sequence(page, causal, Sq, H, Hkv):
    rng = np.random.default_rng(Sq * 7 + (page or 0))
    lengths = [1, 40, 97]
    q, kc, vc, table = cache_case(rng, 3, Sq, H, Hkv, 16, lengths, page)
    seqlens = np.array(lengths, dtype=np.int32)
    o, lse = tessel.attention_with_kvcache(q, kc, vc, seqlens, block_table=table, causal=causal,
                                           return_lse=True)
    ro, rl = reference_kvcache(q, kc, vc, seqlens, table, causal=causal)
    assert o.shape == q.shape and lse.shape == (3, H, Sq)
    assert_matches(o, lse, ro, rl)


def test_kvcache_never_reads_past_a_sequence():
    # NaN everywhere a key is not part of a sequence: any read of it would poison the output.
    rng = np.random.default_rng(3)
    lengths = [20, 33]
    q, kc, vc, table = cache_case(rng, 2, 2, 2, 2, 8, lengths, page=16, num_pages=8)
    used = {(int(table[b, j // 16]), j % 16) for b, n in enumerate(lengths) for j in range(n)}
    for p in range(8):
        for r in range(16):
            if (p, r) not in used:
                kc[p, r] = vc[p, r] = np.nan
    seqlens = np.array(lengths, dtype=np.int32)
    o = tessel.attention_with_kvcache(q, kc, vc, seqlens, block_table=table)
    ro, _ = reference_kvcache(q, kc, vc, seqlens, table)
    assert np.isfinite(o).all() and max_rel_error(o, ro) < TOL


def test_kvcache_takes_one_int_of_seqlens():
    # FlashAttention's flash_attn_with_kvcache takes cache_seqlens as an int too: the same
    # count for every sequence. numpy and CPU torch inputs; True is not a count.
    import torch
    rng = np.random.default_rng(5)
    q, kc, vc, _ = cache_case(rng, 3, 2, 2, 1, 8, [40, 40, 40])
    want = tessel.attention_with_kvcache(q, kc, vc, np.full(3, 40, np.int32), causal=True)
    got = tessel.attention_with_kvcache(q, kc, vc, 40, causal=True)
    assert np.array_equal(got, want)
    got = tessel.attention_with_kvcache(*(torch.from_numpy(x) for x in (q, kc, vc)), 40,
                                        causal=True)
    assert np.array_equal(got.numpy(), want)
    with pytest.raises(TypeError, match="cache_seqlens must be a numpy int32 array"):
        tessel.attention_with_kvcache(q, kc, vc, True)
    with pytest.raises(ValueError, match=r"cache_seqlens\[0\] = 1000 is outside"):
        tessel.attention_with_kvcache(q, kc, vc, 1000)


def test_kvcache_empty_cache_gives_zero_rows():
    rng = np.random.default_rng(4)
    q, kc, vc, _ = cache_case(rng, 2, 3, 2, 1, 8, [0, 5])
    o, lse = tessel.attention_with_kvcache(q, kc, vc, np.array([0, 5], np.int32),
                                           return_lse=True)
    assert (o[0] == 0).all() and np.isneginf(lse[0]).all() and np.isfinite(lse[1]).all()


# --- errors ------------------------------------------------------------------------------------

def varlen_inputs():
    rng = np.random.default_rng(0)
    q = packed(rng, 10, 4, 8)
    k = packed(rng, 12, 2, 8)
    return q, k, k.copy(), cu([4, 6]), cu([5, 7])


@pytest.mark.parametrize("change,error,message", [
    (lambda a: {**a, "q": a["q"][0]}, ValueError, "q must have shape [total, heads, head_dim]"),
    (lambda a: {**a, "k": packed(np.random.default_rng(0), 12, 3, 8),
                "v": packed(np.random.default_rng(0), 12, 3, 8)}, ValueError,
     "query heads (4) must be a multiple of the number of key/value heads (3)"),
    (lambda a: {**a, "v": a["v"][:6]}, ValueError, "differ in shape"),
    (lambda a: {**a, **{n: a[n][:, :, :0] for n in "qkv"}}, ValueError, "head dim 0"),
    (lambda a: {**a, "q": a["q"].astype(np.float16)}, TypeError, "must have one dtype"),
    (lambda a: {**a, **{n: a[n].astype(np.float64) for n in "qkv"}}, TypeError,
     "q is float64; use float32, float16 or bf16 as uint16 bit patterns"),
    (lambda a: {**a, "cu_seqlens_q": a["cu_seqlens_q"].astype(np.int64)}, TypeError,
     "cu_seqlens_q must be int32, got int64"),
    (lambda a: {**a, "cu_seqlens_k": cu([5])}, ValueError, "both must be B + 1"),
    (lambda a: {**a, "cu_seqlens_q": cu([6, 6])}, ValueError,
     "cu_seqlens_q must start at 0, never decrease and end at most at 10"),
    (lambda a: {**a, "cu_seqlens_k": np.array([0, 8, 7], np.int32)}, ValueError,
     "never decrease"),
    (lambda a: {**a, "max_seqlen_q": 5}, ValueError,
     "sequence 1 has 6 rows, more than max_seqlen_q = 5"),
    (lambda a: {**a, "max_seqlen_k": -1}, ValueError, "max_seqlen_k must be a non-negative int"),
    (lambda a: {**a, "q": list(a["q"])}, TypeError, "q must be a numpy array or a CUDA torch"),
])
def test_varlen_errors(change, error, message):
    q, k, v, cq, ck = varlen_inputs()
    args = dict(q=q, k=k, v=v, cu_seqlens_q=cq, cu_seqlens_k=ck, max_seqlen_q=6, max_seqlen_k=7)
    with pytest.raises(error) as e:
        tessel.attention_varlen(**change(args))
    assert message in str(e.value)
    assert "tessel.attention_varlen" in str(e.value)


def cache_inputs():
    rng = np.random.default_rng(0)
    q, kc, vc, table = cache_case(rng, 2, 1, 4, 2, 8, [20, 3], page=16)
    return dict(q=q, k_cache=kc, v_cache=vc, cache_seqlens=np.array([20, 3], np.int32),
                block_table=table)


@pytest.mark.parametrize("change,error,message", [
    (lambda a: {**a, "q": a["q"][0]}, ValueError, "q must have 4 dimensions"),
    (lambda a: {**a, "cache_seqlens": np.array([20], np.int32)}, ValueError,
     "cache_seqlens has 1 entries for a batch of 2"),
    (lambda a: {**a, "cache_seqlens": np.array([20, 99], np.int32)}, ValueError,
     "cache_seqlens[1] = 99 is outside [0, 48]"),
    (lambda a: {**a, "block_table": a["block_table"][:, 0]}, ValueError,
     "block_table must have 2 dimensions"),
    (lambda a: {**a, "block_table": a["block_table"].astype(np.float32)}, TypeError,
     "block_table must be int32, got float32"),
    (lambda a: {**a, "block_table": np.full_like(a["block_table"], 8)}, ValueError,
     "block_table[0, 0] = 8 is not a page of the cache (0 to 7)"),
    (lambda a: {**a, "k_cache": a["k_cache"][:, :0], "v_cache": a["v_cache"][:, :0]},
     ValueError, "page_size (k_cache.shape[1]) must be positive"),
    (lambda a: {**a, "block_table": None}, ValueError, "needs block_table"),
    (lambda a: {**a, "v_cache": a["v_cache"][:, :, :1]}, ValueError, "differ in shape"),
    (lambda a: {**a, "v_cache": a["v_cache"][..., :4]}, ValueError,
     "the KV cache needs one head dim"),
    (lambda a: {**a, **{n: a[n][..., :0] for n in ("q", "k_cache", "v_cache")}}, ValueError,
     "head dim 0"),
    (lambda a: {**a, "block_m": 24}, ValueError, "block_m must be a power of two >= 16, got 24"),
])
def test_kvcache_errors(change, error, message):
    with pytest.raises(error) as e:
        tessel.attention_with_kvcache(**change(cache_inputs()))
    assert message in str(e.value)


class NeedsGrad(np.ndarray):
    requires_grad = True


def test_inputs_that_require_grad_are_refused():
    q, k, v, cq, ck = varlen_inputs()
    with pytest.raises(NotImplementedError, match="attention_varlen: q requires grad.*no backward"):
        tessel.attention_varlen(q.view(NeedsGrad), k, v, cq, ck, 6, 7)
    a = cache_inputs()
    a["v_cache"] = a["v_cache"].view(NeedsGrad)
    with pytest.raises(NotImplementedError, match="v_cache requires grad"):
        tessel.attention_with_kvcache(**a)


def test_the_paged_decode_example_runs():
    # examples/python/decode_paged.py checks every attention output against float64 itself.
    import os
    import pathlib
    import subprocess
    import sys
    root = pathlib.Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, str(root / "examples" / "python" / "decode_paged.py"),
                        "--steps", "3"], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, TESSEL_BUILD_DIR=str(BUILD)))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "decode_paged: max error vs float64 numpy" in r.stdout
    assert r.stdout.count("->") == 3


def test_the_chunked_serving_example_runs():
    # examples/python/serve_chunked.py: mixed batches of prompt chunks and decode steps through
    # attention_varlen(block_table=), each checked against float64 by the example itself.
    import os
    import pathlib
    import subprocess
    import sys
    root = pathlib.Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, str(root / "examples" / "python" / "serve_chunked.py")],
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, TESSEL_BUILD_DIR=str(BUILD)))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "serve_chunked: 6 steps, max error vs float64 numpy" in r.stdout
    # Prompt chunks beside decode steps in one call, then decode steps alone.
    assert "step 2: queries per sequence {0: 16, 1: 1, 2: 9}" in r.stdout


@pytest.mark.parametrize("window,softcap,causal", [((20, 0), None, True), ((10, 5), None, False),
                                                   ((-1, 3), 2.0, False), (None, 2.0, True)])
def test_varlen_with_flash_arguments(window, softcap, causal):
    # FlashAttention's window_size and softcap, positions bottom-right aligned as causal.
    rng = np.random.default_rng(11)
    lq, lk = [1, 37, 70, 16], [5, 60, 71, 9]
    q = packed(rng, sum(lq), 4, 16)
    k, v = packed(rng, sum(lk), 2, 16), packed(rng, sum(lk), 2, 16)
    o, lse = tessel.attention_varlen(q, k, v, cu(lq), cu(lk), max(lq), max(lk), causal=causal,
                                     return_lse=True, window_size=window, softcap=softcap)
    ro, rl = reference_varlen(q, k, v, cu(lq), cu(lk), causal=causal, window=window,
                              softcap=softcap)
    assert_matches(o, lse, ro, rl)


@pytest.mark.parametrize("page", [None, 16, 7], ids=["contiguous", "p16", "p7"])
@pytest.mark.parametrize("Sq,num_splits", [(1, None), (1, 3), (5, None), (5, 1)])
@pytest.mark.parametrize("window,softcap", [((30, 0), None), ((12, 4), 3.0), (None, 3.0)])
def test_kvcache_with_flash_arguments(page, Sq, num_splits, window, softcap):
    # Decode with a sliding window (Mistral's (W, 0)) and a soft cap (Gemma 2's), on the one
    # program a head and on the split-KV path, contiguous and paged.
    rng = np.random.default_rng(Sq + (page or 0))
    lengths = [1, 40, 97]
    q, kc, vc, table = cache_case(rng, 3, Sq, 4, 2, 16, lengths, page)
    seqlens = np.array(lengths, dtype=np.int32)
    o, lse = tessel.attention_with_kvcache(q, kc, vc, seqlens, block_table=table, causal=True,
                                           return_lse=True, num_splits=num_splits,
                                           window_size=window, softcap=softcap)
    ro, rl = reference_kvcache(q, kc, vc, seqlens, table, causal=True, window=window,
                               softcap=softcap)
    assert_matches(o, lse, ro, rl)


@pytest.mark.parametrize("per_batch", [False, True], ids=["slopes[H]", "slopes[B,H]"])
@pytest.mark.parametrize("causal", [False, True])
def test_varlen_with_alibi(causal, per_batch):
    # FlashAttention's alibi_slopes: -slope·|i' - j|, i' bottom-right aligned, with a window
    # and a cap on one case; GQA.
    rng = np.random.default_rng(12)
    lq, lk = [1, 37, 70, 16], [5, 60, 71, 9]
    q = packed(rng, sum(lq), 4, 16)
    k, v = packed(rng, sum(lk), 2, 16), packed(rng, sum(lk), 2, 16)
    slopes = rng.uniform(0.05, 0.5, (4, 4) if per_batch else (4,)).astype(np.float32)
    extra = dict(window_size=(20, 3), softcap=4.0) if per_batch else {}
    o, lse = tessel.attention_varlen(q, k, v, cu(lq), cu(lk), max(lq), max(lk), causal=causal,
                                     return_lse=True, alibi_slopes=slopes, **extra)
    ro, rl = reference_varlen(q, k, v, cu(lq), cu(lk), causal=causal, alibi=slopes,
                              window=extra.get("window_size"), softcap=extra.get("softcap"))
    assert_matches(o, lse, ro, rl)


@pytest.mark.parametrize("page", [None, 7], ids=["contiguous", "p7"])
@pytest.mark.parametrize("Sq,num_splits", [(1, None), (1, 3), (5, None), (5, 1), (5, 2)])
@pytest.mark.parametrize("per_batch", [False, True], ids=["slopes[H]", "slopes[B,H]"])
def test_kvcache_with_alibi(page, Sq, num_splits, per_batch):
    # On the one program a head and on the split-KV path, whose rows are the group's heads (each
    # row its own head's slope; Sq = 5 with two heads a group packs heads × positions).
    rng = np.random.default_rng(Sq + (page or 0) + 10 * per_batch)
    lengths = [1, 40, 97]
    q, kc, vc, table = cache_case(rng, 3, Sq, 4, 2, 16, lengths, page)
    seqlens = np.array(lengths, dtype=np.int32)
    slopes = rng.uniform(0.05, 0.5, (3, 4) if per_batch else (4,)).astype(np.float32)
    o, lse = tessel.attention_with_kvcache(q, kc, vc, seqlens, block_table=table, causal=True,
                                           return_lse=True, num_splits=num_splits,
                                           alibi_slopes=slopes)
    ro, rl = reference_kvcache(q, kc, vc, seqlens, table, causal=True, alibi=slopes)
    assert_matches(o, lse, ro, rl)


def test_serving_refuses_bad_alibi_and_windows():
    rng = np.random.default_rng(0)
    q, kc, vc, _ = cache_case(rng, 1, 1, 2, 1, 16, [10])
    seqlens = np.array([10], np.int32)
    with pytest.raises(ValueError, match=r"attention_with_kvcache: alibi_slopes has shape \(3,\)"):
        tessel.attention_with_kvcache(q, kc, vc, seqlens, alibi_slopes=np.ones(3, np.float32))
    with pytest.raises(TypeError, match="alibi_slopes must be float32"):
        tessel.attention_with_kvcache(q, kc, vc, seqlens, alibi_slopes=np.ones(2, np.float16))
    with pytest.raises(ValueError, match="window_size must be a pair"):
        tessel.attention_with_kvcache(q, kc, vc, seqlens, window_size=4)
    lq = [3]
    x = packed(rng, 3, 2, 16)
    with pytest.raises(ValueError, match="softcap must be a positive number"):
        tessel.attention_varlen(x, x, x, cu(lq), cu(lq), 3, 3, softcap=-1.0)
