"""attention_varlen with block_table (python/tessel/varlen_cache.py): packed queries of
sequences of mixed lengths — decode steps beside prefill chunks — against a paged KV cache, on
the interpreter against tessel.reference's float64 varlen attention over each sequence's keys
gathered from its pages; key counts from seqused_k or cu_seqlens_k; bad calls refused."""
import numpy as np
import pytest

from dsl_helpers import BUILD  # noqa: F401  (puts the build's package on the path)
import tessel
from tessel.reference import max_rel_error, reference_varlen

H, HKV, D = 4, 2, 32


def _rows(rng, *shape):
    return rng.standard_normal(shape).astype(np.float16)


def _batch(rng, nq, nk, page, spare=3):
    """q packed for query counts nq, a paged cache holding nk keys a sequence in shuffled
    pages, and the packed keys the reference reads."""
    cu_q = np.concatenate([[0], np.cumsum(nq)]).astype(np.int32)
    per = max(1, -(-max(nk) // page))
    num_pages = len(nk) * per + spare
    table = rng.permutation(num_pages)[:len(nk) * per].reshape(len(nk), per).astype(np.int32)
    kc, vc = (_rows(rng, num_pages, page, HKV, D) for _ in range(2))
    rows = lambda c, b, n: c[table[b, np.arange(n) // page], np.arange(n) % page]  # noqa: E731
    k = np.concatenate([rows(kc, b, n) for b, n in enumerate(nk)])
    v = np.concatenate([rows(vc, b, n) for b, n in enumerate(nk)])
    cu_k = np.concatenate([[0], np.cumsum(nk)]).astype(np.int32)
    return _rows(rng, int(cu_q[-1]), H, D), kc, vc, cu_q, cu_k, table, k, v


@pytest.mark.parametrize("pack", [True, False], ids=["packed", "one_launch"])
@pytest.mark.parametrize("page", [16, 64, 7])
@pytest.mark.parametrize("rule", ["causal", "none", "window", "alibi"])
@pytest.mark.parametrize("lengths", ["seqused_k", "cu_seqlens_k"])
def test_mixed_batch_against_the_paged_cache(lengths, rule, page, pack, monkeypatch):
    from tessel import varlen_cache
    monkeypatch.setattr(varlen_cache, "PACK_DECODE_ROWS", pack)
    rng = np.random.default_rng(page + len(rule) + len(lengths))
    nq = [1, 37, 1, 0, 5]                     # decode, a prefill chunk, decode, none, a chunk
    nk = [90, 37, 1, 12, 64]
    q, kc, vc, cu_q, cu_k, table, k, v = _batch(rng, nq, nk, page)
    causal = rule == "causal"
    window = (8, 0) if rule == "window" else None
    alibi = rng.uniform(0.1, 1, H).astype(np.float32) if rule == "alibi" else None
    given = dict(seqused_k=np.array(nk, np.int32), cu_k=None) if lengths == "seqused_k" else \
        dict(seqused_k=None, cu_k=cu_k)
    o, lse = tessel.attention_varlen(q, kc, vc, cu_q, given["cu_k"], max(nq), max(nk),
                                     causal=causal, window_size=window, alibi_slopes=alibi,
                                     return_lse=True, block_table=table,
                                     seqused_k=given["seqused_k"])
    ro, rl = reference_varlen(q, k, v, cu_q, cu_k, causal=causal, window=window, alibi=alibi)
    assert o.shape == q.shape and lse.shape == (H, q.shape[0])
    assert max_rel_error(o, ro) < 2e-2
    seen = np.isfinite(rl)
    assert np.array_equal(np.isfinite(lse), seen) and np.allclose(lse[seen], rl[seen], atol=2e-3)


@pytest.mark.parametrize("heads", [(4, 2), (2, 2)], ids=["gqa", "mha"])
@pytest.mark.parametrize("nk", [[1500, 700, 3, 1100], [90, 1, 64, 40]], ids=["split", "short"])
def test_decode_steps_take_the_split_kv_program(nk, heads, monkeypatch):
    """max_seqlen_q = 1: serving_decode's split-KV program with the group's heads packed as
    rows (VARLEN_Q): sequence b's query at row cu_q[b], none for the sequence without one (its
    row of o, past the others, is not written), keys split where the cache is long."""
    from tessel import serving_decode
    Hq, Hk = heads
    rng = np.random.default_rng(len(nk) + Hq + nk[0])
    nq = [1, 0, 1, 1]
    seen = []
    launch = serving_decode.launch
    monkeypatch.setattr(serving_decode, "launch",
                        lambda *a, **k: seen.append(k["n_splits"]) or launch(*a, **k))
    q, kc, vc, cu_q, cu_k, table, k, v = _batch(rng, nq, nk, 64)
    q = np.concatenate([q, _rows(rng, 1, H, D)])[:, :Hq]     # a row past the last sequence
    kc, vc, k, v = kc[:, :, :Hk], vc[:, :, :Hk], k[:, :Hk], v[:, :Hk]
    o, lse = tessel.attention_varlen(q, np.ascontiguousarray(kc), np.ascontiguousarray(vc),
                                     cu_q, cu_k, 1, max(nk), causal=True, return_lse=True,
                                     block_table=table)
    ro, rl = reference_varlen(q, k, v, cu_q, cu_k, causal=True)
    assert seen and (seen[0] > 1) == (max(nk) >= 1024)
    assert max_rel_error(o[:3], ro[:3]) < 2e-2
    assert np.allclose(lse[:, :3], rl[:, :3], atol=2e-3)


@pytest.mark.parametrize("heads", [(4, 2), (2, 1), (2, 2)], ids=["gqa", "mqa", "mha"])
def test_mixed_batch_packs_its_decode_steps(heads, monkeypatch):
    """max_seqlen_q > 1 with sequences of one query: those run the split-KV program (VARLEN_Q,
    split where the cache is long), the others varlen_cache_kernel with SKIP_SINGLE. Each row
    of o and lse is written by its own launch only: with outputs filled with NaN and one of
    the two launches left out, the other's rows stay NaN, as does a row past the last
    sequence."""
    from tessel import serving_checks, serving_decode, varlen_cache
    monkeypatch.setattr(varlen_cache, "PACK_DECODE_ROWS", True)
    monkeypatch.setattr(varlen_cache, "_out", lambda kind, q, shape, dtype=None: np.full(
        shape, np.nan, dtype or q.dtype))
    Hq, Hk = heads
    rng = np.random.default_rng(Hq * 3 + Hk)
    nq = [1, 20, 0, 1, 2, 1]                  # 20 > MAX_FEW_QUERIES: not gathered instead
    nk = [1500, 40, 30, 2, 1100, 700]
    q, kc, vc, cu_q, cu_k, table, k, v = _batch(rng, nq, nk, 64)
    q = np.concatenate([q, _rows(rng, 1, H, D)])[:, :Hq]     # a row past the last sequence
    kc, vc = (np.ascontiguousarray(x[:, :, :Hk]) for x in (kc, vc))
    ro, rl = reference_varlen(q, k[:, :Hk], v[:, :Hk], cu_q, cu_k, causal=True)
    single = np.repeat(np.array(nq) == 1, nq)                 # the rows of decode steps
    split, launch = serving_decode.launch, serving_checks._launch
    for left_out in (None, "split", "varlen"):
        seen = []
        monkeypatch.setattr(serving_decode, "launch", lambda *a, **k: seen.append(
            k["n_splits"]) or (split(*a, **k) if left_out != "split" else lambda *a: None))
        monkeypatch.setattr(varlen_cache, "_launch", lambda f, grid, args, cx: seen.append(
            cx.get("SKIP_SINGLE")) or (launch(f, grid, args, cx) if left_out != "varlen"
                                       else None))
        o, lse = tessel.attention_varlen(q, kc, vc, cu_q, cu_k, max(nq), max(nk), causal=True,
                                         return_lse=True, block_table=table)
        assert seen[0] > 1 and seen[1:] == [True], seen       # split: 1500 keys
        written = {None: np.ones_like(single), "split": ~single, "varlen": single}[left_out]
        written = np.concatenate([written, [False]])
        assert np.isnan(o[~written]).all() and np.isnan(lse[:, ~written]).all()
        assert max_rel_error(o[written], ro[written]) < 2e-2
        assert np.allclose(lse[:, written], rl[:, written], atol=2e-3)


@pytest.mark.parametrize("packed", [True, False], ids=["packed", "one_launch"])
@pytest.mark.parametrize("rule", ["causal", "none", "window", "alibi"])
@pytest.mark.parametrize("page", [16, 7])
def test_few_queries_a_sequence(page, rule, packed, monkeypatch):
    """Speculative decoding's shape, a few queries a sequence (max_seqlen_q = 4): with
    FEW_QUERIES_PACKED the queries gathered right-aligned into [B, 4, H, D] for
    attention_with_kvcache and scattered back; same answer as the one launch, bottom-right
    causal, window and ALiBi included; a row past the last sequence is not written."""
    from tessel import serving, varlen_cache
    monkeypatch.setattr(varlen_cache, "FEW_QUERIES_PACKED", packed)
    seen = []
    inner = serving.attention_with_kvcache
    monkeypatch.setattr(serving, "attention_with_kvcache",
                        lambda q, *a, **k: seen.append(q.shape) or inner(q, *a, **k))
    rng = np.random.default_rng(page + len(rule))
    nq = [3, 1, 0, 4, 2, 4]
    nk = [90, 1, 12, 3, 200, 64]              # 3 keys for 4 queries: a row sees none
    q, kc, vc, cu_q, cu_k, table, k, v = _batch(rng, nq, nk, page)
    q = np.concatenate([q, _rows(rng, 1, H, D)])                  # a row past the last
    window = (5, 0) if rule == "window" else None
    alibi = rng.uniform(0.1, 1, H).astype(np.float32) if rule == "alibi" else None
    o, lse = tessel.attention_varlen(q, kc, vc, cu_q, cu_k, max(nq), max(nk),
                                     causal=rule != "none", window_size=window,
                                     alibi_slopes=alibi, return_lse=True, block_table=table)
    ro, rl = reference_varlen(q, k, v, cu_q, cu_k, causal=rule != "none", window=window,
                              alibi=alibi)
    assert seen == ([(len(nq), 4, H, D)] if packed else [])
    n = int(cu_q[-1])
    assert max_rel_error(o[:n], ro[:n]) < 2e-2
    assert np.array_equal(np.isfinite(lse[:, :n]), np.isfinite(rl[:, :n]))
    seen_rows = np.isfinite(rl[:, :n])
    assert np.allclose(lse[:, :n][seen_rows], rl[:, :n][seen_rows], atol=2e-3)
    assert not o[n:].any() and not lse[:, n:].any()


def test_torch_cpu_tensors_and_their_grad_refused():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    q, kc, vc, cu_q, cu_k, table, k, v = _batch(rng, [3, 1], [20, 50], 16)
    t = torch.from_numpy
    o = tessel.attention_varlen(t(q), t(kc), t(vc), t(cu_q), t(cu_k), 3, 50, causal=True,
                                block_table=t(table))
    ro, _ = reference_varlen(q, k, v, cu_q, cu_k, causal=True)
    assert isinstance(o, torch.Tensor) and max_rel_error(o.numpy(), ro) < 2e-2
    with pytest.raises(NotImplementedError, match="q requires grad"):
        tessel.attention_varlen(t(q).float().requires_grad_().half(), t(kc), t(vc), t(cu_q),
                                t(cu_k), 3, 50, block_table=t(table))


def test_bad_calls_are_refused():
    rng = np.random.default_rng(2)
    q, kc, vc, cu_q, cu_k, table, k, v = _batch(rng, [3, 1], [20, 50], 16)
    call = tessel.attention_varlen
    with pytest.raises(ValueError, match=r"give one"):
        call(q, kc, vc, cu_q, None, 3, 50, block_table=table)
    with pytest.raises(ValueError, match=r"sequence 1 has 70 keys; its pages hold 0 to 64"):
        call(q, kc, vc, cu_q, None, 3, 70, block_table=table,
             seqused_k=np.array([20, 70], np.int32))
    with pytest.raises(ValueError, match="more than max_seqlen_k = 40"):
        call(q, kc, vc, cu_q, cu_k, 3, 40, block_table=table)
    bad = table.copy()
    bad[1, 3] = 99
    with pytest.raises(ValueError, match=r"block_table\[1, 3\] = 99 is not a page"):
        call(q, kc, vc, cu_q, cu_k, 3, 50, block_table=bad)
    with pytest.raises(ValueError, match="paged cache .num_pages, page_size, Hkv, D."):
        call(q, k, v, cu_q, cu_k, 3, 50, block_table=table)
    with pytest.raises(ValueError, match="block_table has 2 rows for 1 sequences"):
        call(q[:3], kc, vc, cu_q[:2], cu_k[:2], 3, 50, block_table=table)


@pytest.mark.parametrize("pack", [True, False], ids=["packed", "one_launch"])
def test_compact_grid_against_the_paged_cache(pack, monkeypatch):
    # A chunk of 150 queries beside decode steps, an empty sequence and short chunks, with a row
    # of q past the last sequence: the compact grid (TILES) launches total_q // 16 + B programs
    # a head, computes what the full grid does bit for bit and leaves that row alone.
    from tessel import serving_checks, varlen_cache
    monkeypatch.setattr(varlen_cache, "PACK_DECODE_ROWS", pack)
    monkeypatch.setattr(varlen_cache, "FEW_QUERIES_PACKED", False)
    monkeypatch.setattr(varlen_cache, "_out", lambda kind, q, shape, dtype=None: np.full(
        shape, np.nan, dtype or q.dtype))
    rng = np.random.default_rng(11)
    nq = [1, 150, 1, 0, 3, 1, 17]
    nk = [60, 170, 9, 5, 3, 33, 40]
    q, kc, vc, cu_q, cu_k, table, k, v = _batch(rng, nq, nk, 16)
    q = np.concatenate([q, _rows(rng, 1, H, D)])
    grids, launch = [], varlen_cache._launch
    monkeypatch.setattr(varlen_cache, "_launch", lambda f, grid, args, cx: grids.append(
        (grid, cx.get("TILES"))) or launch(f, grid, args, cx))
    outs = []
    for on in (True, False):
        monkeypatch.setattr(serving_checks, "VARLEN_TILES", on)
        outs.append(tessel.attention_varlen(q, kc, vc, cu_q, cu_k, max(nq), max(nk),
                                            causal=True, return_lse=True, block_table=table,
                                            block_m=16, block_n=16))
    assert grids == [((q.shape[0] // 16 + 7, H, 1), True), ((10, 7 * H, 1), None)], grids
    for a, b in zip(*outs):
        assert np.array_equal(a, b, equal_nan=True)
    o, lse = outs[0]
    assert np.isnan(o[-1]).all() and np.isnan(lse[:, -1]).all()
    ro, rl = reference_varlen(q[:-1], k, v, cu_q, cu_k, causal=True)
    assert max_rel_error(o[:-1], ro) < 2e-2
    assert np.allclose(lse[:, :-1], rl, atol=2e-3)
