"""attention_with_kvcache's cache_batch_idx and cache_leftpad (FlashAttention's
flash_attn_with_kvcache arguments) on the interpreter, against tessel.reference's float64
attention over the rows they name: a contiguous cache of more sequences than the batch read
and appended through the index, left-padded sequences under causal, window, ALiBi and rotary,
on both the one-program-per-query-block kernel and the split-KV path; bad calls refused."""
import numpy as np
import pytest

from dsl_helpers import BUILD  # noqa: F401  (puts the build's package on the path)
import tessel
from tessel.reference import max_rel_error, reference_kvcache, reference_rotary

B, HKV, H, D, S = 3, 2, 4, 32, 96


def _rows(rng, *shape):
    return rng.standard_normal(shape).astype(np.float16)


@pytest.mark.parametrize("Sq,splits", [(1, None), (1, 3), (6, 1)],
                         ids=["decode", "split3", "chunk"])
def test_batch_index_reads_and_appends_the_named_sequences(Sq, splits):
    rng = np.random.default_rng(Sq * 7 + (splits or 0))
    kc, vc = (_rows(rng, 5, S, HKV, D) for _ in range(2))
    idx = np.array([4, 0, 2], np.int32)
    seqlens = np.array([70, 0, 33], np.int32)
    kn, vn = (_rows(rng, B, 2, HKV, D) for _ in range(2))
    q = _rows(rng, B, Sq, H, D)
    want_k, want_v = kc.copy(), vc.copy()
    for b in range(B):
        want_k[idx[b], seqlens[b]:seqlens[b] + 2] = kn[b]
        want_v[idx[b], seqlens[b]:seqlens[b] + 2] = vn[b]
    o, lse = tessel.attention_with_kvcache(q, kc, vc, seqlens, causal=True, return_lse=True,
                                           num_splits=splits, k=kn, v=vn, cache_batch_idx=idx)
    assert np.array_equal(kc, want_k) and np.array_equal(vc, want_v)
    ro, rl = reference_kvcache(q, want_k, want_v, seqlens + 2, causal=True, batch_idx=idx)
    assert max_rel_error(o, ro) < 2e-2
    assert np.allclose(lse, rl, atol=2e-3)


@pytest.mark.parametrize("paged", [False, True], ids=["contiguous", "paged"])
@pytest.mark.parametrize("Sq,splits", [(1, None), (1, 4), (5, 1)],
                         ids=["decode", "split4", "chunk"])
@pytest.mark.parametrize("rule", ["causal", "window", "alibi", "none"])
def test_left_padding_drops_the_rows_before_it(rule, Sq, splits, paged):
    rng = np.random.default_rng(len(rule) * 11 + Sq + paged)
    seqlens = np.array([80, 19, 64], np.int32)
    leftpad = np.array([13, 19, 0], np.int32)       # one sequence padded whole: no key
    if paged:
        page = 16
        table = rng.permutation(B * 6).reshape(B, 6).astype(np.int32)
        kc, vc = (_rows(rng, B * 6, page, HKV, D) for _ in range(2))
    else:
        table = None
        kc, vc = (_rows(rng, B, S, HKV, D) for _ in range(2))
    q = _rows(rng, B, Sq, H, D)
    causal = rule == "causal"
    window = (20, 0) if rule == "window" else None
    alibi = rng.uniform(0.1, 1.0, H).astype(np.float32) if rule == "alibi" else None
    o, lse = tessel.attention_with_kvcache(q, kc, vc, seqlens, block_table=table,
                                           causal=causal, window_size=window,
                                           alibi_slopes=alibi, return_lse=True,
                                           num_splits=splits, cache_leftpad=leftpad)
    ro, rl = reference_kvcache(q, kc, vc, seqlens, table, causal=causal, window=window,
                               alibi=alibi, leftpad=leftpad)
    assert max_rel_error(o, ro) < 2e-2
    assert np.array_equal(o[1], np.zeros_like(o[1])) and np.isneginf(lse[1]).all()
    seen = np.isfinite(rl)
    assert np.array_equal(np.isfinite(lse), seen)
    assert np.allclose(lse[seen], rl[seen], atol=2e-3)


@pytest.mark.parametrize("paged", [False, True], ids=["contiguous", "paged"])
@pytest.mark.parametrize("splits", [1, 3])
def test_rows_before_the_padding_are_never_read(paged, splits):
    """NaN in the padded rows (a cache's unwritten rows may hold anything) stays out: the key
    loop starts at the padding, not at its block with the rows masked (P = 0 times NaN)."""
    rng = np.random.default_rng(17 + splits + paged)
    seqlens = np.array([90, 50, 64], np.int32)
    leftpad = np.array([37, 1, 64], np.int32)
    kc, vc = (_rows(rng, B, S, HKV, D) for _ in range(2))
    for b in range(B):
        kc[b, :leftpad[b]] = np.nan
        vc[b, :leftpad[b]] = np.nan
    table = None
    if paged:                          # pages of 16 rows in a shuffled order
        table = rng.permutation(B * 6).reshape(B, 6).astype(np.int32)
        kp, vp = (np.empty((B * 6, 16, HKV, D), np.float16) for _ in range(2))
        for b in range(B):
            for p in range(6):
                kp[table[b, p]] = kc[b, 16 * p:16 * p + 16]
                vp[table[b, p]] = vc[b, 16 * p:16 * p + 16]
    q = _rows(rng, B, 2, H, D)
    o = tessel.attention_with_kvcache(q, kp if paged else kc, vp if paged else vc, seqlens,
                                      block_table=table, causal=True, num_splits=splits,
                                      cache_leftpad=leftpad)
    ro, _ = reference_kvcache(q, np.nan_to_num(kc), np.nan_to_num(vc), seqlens, causal=True,
                              leftpad=leftpad)
    assert np.isfinite(o).all() and max_rel_error(o, ro) < 2e-2


def test_left_padding_with_new_rows_and_rotary_keeps_cache_positions():
    """The append still lands at cache_seqlens and rotary rotates at the cache's positions
    (FlashAttention's kernel offsets both by the padding's start, i.e. absolute rows)."""
    rng = np.random.default_rng(5)
    kc, vc = (_rows(rng, B, S, HKV, D) for _ in range(2))
    kn, vn = (_rows(rng, B, 3, HKV, D) for _ in range(2))
    q = _rows(rng, B, 3, H, D)
    seqlens = np.array([40, 7, 60], np.int32)
    leftpad = np.array([30, 0, 59], np.int32)
    cos, sin = (rng.uniform(-1, 1, (S, 8)).astype(np.float16) for _ in range(2))
    before = kc.copy()
    o = tessel.attention_with_kvcache(q, kc, vc, seqlens, causal=True, k=kn, v=vn,
                                      rotary_cos=cos, rotary_sin=sin, cache_leftpad=leftpad,
                                      cache_batch_idx=np.array([0, 1, 2], np.int32))
    pos = seqlens[:, None] + np.arange(3)
    want_k = before.copy()
    for b in range(B):
        want_k[b, pos[b]] = reference_rotary(kn[b], cos, sin, pos[b], True).astype(np.float16)
    assert max_rel_error(kc, want_k) < 2e-3
    qr = np.stack([reference_rotary(q[b], cos, sin, pos[b], True) for b in range(B)])
    ro, _ = reference_kvcache(qr, kc, vc, seqlens + 3, causal=True, leftpad=leftpad)
    assert max_rel_error(o, ro) < 2e-2


def test_torch_cpu_tensors_take_both():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(9)
    kc, vc = (_rows(rng, 4, S, HKV, D) for _ in range(2))
    q = _rows(rng, B, 1, H, D)
    seqlens, idx, lp = (np.array(x, np.int32) for x in ([50, 9, 96], [3, 3, 1], [10, 0, 95]))
    t = torch.from_numpy
    o = tessel.attention_with_kvcache(t(q), t(kc), t(vc), t(seqlens), cache_batch_idx=t(idx),
                                      cache_leftpad=t(lp))
    ro, _ = reference_kvcache(q, kc, vc, seqlens, batch_idx=idx, leftpad=lp)
    assert isinstance(o, torch.Tensor) and max_rel_error(o.numpy(), ro) < 2e-2


def test_bad_indices_are_refused():
    rng = np.random.default_rng(2)
    kc, vc = (_rows(rng, 4, S, HKV, D) for _ in range(2))
    q = _rows(rng, B, 1, H, D)
    seqlens = np.array([5, 6, 7], np.int32)
    call = tessel.attention_with_kvcache
    with pytest.raises(ValueError, match=r"cache_batch_idx\[1\] = 4 is not a sequence"):
        call(q, kc, vc, seqlens, cache_batch_idx=np.array([0, 4, 1], np.int32))
    with pytest.raises(ValueError, match="cache_batch_idx has 2 entries for a batch of 3"):
        call(q, kc, vc, seqlens, cache_batch_idx=np.array([0, 1], np.int32))
    with pytest.raises(TypeError, match="cache_batch_idx must be int32, got int64"):
        call(q, kc, vc, seqlens, cache_batch_idx=np.array([0, 1, 2], np.int64))
    with pytest.raises(ValueError, match="block_table already says"):
        call(q, kc, vc, seqlens, block_table=np.zeros((B, 1), np.int32),
             cache_batch_idx=np.array([0, 1, 2], np.int32))
    with pytest.raises(ValueError, match="B = 3"):            # without the index, as before
        call(q, kc, vc, seqlens)
    with pytest.raises(ValueError, match="cache_leftpad has 4 entries for a batch of 3"):
        call(q, kc[:3], vc[:3], seqlens, cache_leftpad=np.zeros(4, np.int32))
    with pytest.raises(TypeError, match="cache_leftpad must be a numpy int32"):
        call(q, kc[:3], vc[:3], seqlens, cache_leftpad=[0, 0, 0])
    with pytest.raises(ValueError, match=r"cache_leftpad\[2\] = 8 is outside"):
        call(q, kc[:3], vc[:3], seqlens, cache_leftpad=np.array([0, 6, 8], np.int32))


def test_new_rows_that_require_grad_are_refused():
    # Written into the cache, k and v would lose their gradient: refused as q and the cache are.
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    kc, vc = (torch.from_numpy(_rows(rng, B, S, HKV, D)) for _ in range(2))
    q = torch.from_numpy(_rows(rng, B, 1, H, D))
    kn = torch.from_numpy(_rows(rng, B, 1, HKV, D)).float().requires_grad_()
    vn = torch.from_numpy(_rows(rng, B, 1, HKV, D))
    with pytest.raises(NotImplementedError, match="k requires grad"):
        tessel.attention_with_kvcache(q, kc, vc, 5, k=kn.half(), v=vn)
