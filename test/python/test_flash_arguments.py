"""FlashAttention's window_size, softcap and alibi_slopes on tessel.attention (flash_mods.py),
on the interpreter against float64 numpy."""
import numpy as np
import pytest

import dsl_helpers  # noqa: F401  (puts the built package on sys.path)
import tessel
from tessel import _tessel
from tessel import language as tl
from tessel.reference import max_rel_error

pytestmark = pytest.mark.skipif(not _tessel.has_interpreter, reason="no interpreter")

B, H, N, D = 2, 3, 70, 32


def inputs(seed=0, Nk=N):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((B, H, N, D)).astype(np.float32),
            rng.standard_normal((B, H, Nk, D)).astype(np.float32),
            rng.standard_normal((B, H, Nk, D)).astype(np.float32))


def reference(q, k, v, causal=False, window=None, cap=None, slopes=None, bias=None, keep=None):
    s = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k.astype(np.float64)) / np.sqrt(D)
    i, j = np.arange(q.shape[2])[:, None], np.arange(k.shape[2])[None, :]
    if cap:
        s = cap * np.tanh(s / cap)
    if slopes is not None:
        sl = slopes.astype(np.float64)
        s = s - (sl[None, :] if sl.ndim == 1 else sl)[:, :, None, None] * np.abs(i - j)
    if bias is not None:
        s = bias(s, i, j)
    ok = np.ones(s.shape[2:], bool)
    if causal:
        ok &= i >= j
    if window:
        left, right = window
        ok &= (j >= i - left) if left >= 0 else True
        ok &= (j <= i + right) if right >= 0 else True
    if keep is not None:
        ok &= keep(i, j)
    s = np.where(ok, s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - np.where(np.isfinite(m), m, 0))
    l = p.sum(-1, keepdims=True)
    return np.where(l > 0, p / np.where(l > 0, l, 1), 0) @ v.astype(np.float64)


@pytest.mark.parametrize("window,causal", [((10, 5), False), ((10, 0), True), ((-1, 3), False),
                                           ((4, -1), False), ((0, 0), False)])
def test_window_size(window, causal):
    q, k, v = inputs()
    o = tessel.attention(q, k, v, causal=causal, window_size=window)
    assert max_rel_error(o, reference(q, k, v, causal=causal, window=window)) < 1e-5


def test_no_window_is_the_plain_call():
    q, k, v = inputs()
    assert np.array_equal(tessel.attention(q, k, v, window_size=(-1, -1)),
                          tessel.attention(q, k, v))
    assert np.array_equal(tessel.attention(q, k, v, softcap=0.0), tessel.attention(q, k, v))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("per_batch", [False, True])
def test_softcap_and_alibi(causal, per_batch):
    q, k, v = inputs(1)
    rng = np.random.default_rng(2)
    slopes = rng.uniform(0.01, 0.5, (B, H) if per_batch else (H,)).astype(np.float32)
    o = tessel.attention(q, k, v, causal=causal, softcap=3.0, alibi_slopes=slopes)
    want = reference(q, k, v, causal=causal, cap=3.0, slopes=slopes)
    assert max_rel_error(o, want) < 1e-5
    # The slopes are a kernel argument: new values, the same kernel, their result.
    o2 = tessel.attention(q, k, v, causal=causal, softcap=3.0, alibi_slopes=slopes * 2)
    assert max_rel_error(o2, reference(q, k, v, causal=causal, cap=3.0, slopes=slopes * 2)) \
        < 1e-5


def test_composed_with_the_users_mods_in_order():
    # Scaled, capped, biased, then the score_mod; the window and the mask_mod and-ed.
    q, k, v = inputs(3, Nk=90)
    slopes = np.full(H, 0.1, np.float32)

    def plus_position(score, b, h, q_idx, kv_idx):
        return score + 0.01 * kv_idx

    def even_keys(b, h, q_idx, kv_idx):
        return kv_idx % 2 == 0
    o, lse = tessel.attention(q, k, v, softcap=2.0, alibi_slopes=slopes, window_size=(30, 30),
                              score_mod=plus_position, mask_mod=even_keys, return_lse=True)
    want = reference(q, k, v, cap=2.0, slopes=slopes, window=(30, 30),
                     bias=lambda s, i, j: s + 0.01 * j, keep=lambda i, j: j % 2 == 0)
    assert max_rel_error(o, want) < 1e-5


def test_the_same_arguments_make_the_same_mods():
    from tessel.flash_mods import flash_mods
    q, _, _ = inputs()
    a = flash_mods(q, False, (8, 8), 5.0, None, None, None)
    b = flash_mods(q, False, (8, 8), 5.0, None, None, None)
    assert a == b and a[0] is b[0] and a[1] is b[1]
    assert flash_mods(q, False, (8, 9), 5.0, None, None, None)[1] is not a[1]
    assert tessel.compile_attention(q, q, q, window_size=(8, 8)) is \
        tessel.compile_attention(q, q, q, window_size=(8, 8))


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(window_size=(1, 2, 3)), ValueError, "window_size must be a pair"),
    (dict(window_size=(-2, 0)), ValueError, "left bound must be an int >= -1"),
    (dict(window_size=(1.5, 0)), ValueError, "left bound must be an int"),
    (dict(softcap=-1.0), ValueError, "softcap must be a positive number"),
    (dict(softcap="3"), ValueError, "softcap must be a positive number"),
    (dict(alibi_slopes=np.ones(4, np.float32)), ValueError, r"alibi_slopes has shape \(4,\)"),
    (dict(alibi_slopes=np.ones(3, np.float64)), TypeError, "alibi_slopes must be float32"),
    (dict(alibi_slopes=[0.1, 0.2, 0.3]), TypeError, "alibi_slopes must be a float32 array"),
])
def test_bad_arguments_are_refused(kwargs, error, match):
    q, k, v = inputs()
    with pytest.raises(error, match=match):
        tessel.attention(q, k, v, **kwargs)


def test_window_with_a_block_mask_is_refused():
    q, k, v = inputs()

    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx
    bm = tessel.block_mask(causal, None, None, N, N)
    with pytest.raises(ValueError, match="window_size cannot be combined with a block_mask"):
        tessel.attention(q, k, v, mask_mod=causal, block_mask=bm, window_size=(4, 0))
    # softcap is a score_mod: it goes with a block mask.
    o = tessel.attention(q, k, v, mask_mod=causal, block_mask=bm, softcap=2.0)
    assert max_rel_error(o, reference(q, k, v, causal=True, cap=2.0)) < 1e-5


@pytest.mark.parametrize("causal,separated", [(True, True), (False, False)])
def test_causal_alibi_is_an_affine_bias(causal, separated):
    # Keys never after the query: -slope·|i - j| is slope·(j - i), which tile-separate-bias
    # computes a row and a column at a time at the GPU's 128-row blocks (no per-score
    # conversion of an index tile left); both sides of the query: the element-wise minimum.
    q, _, _ = inputs()
    kernel = tessel.compile_attention(q, q, q, causal=causal, softcap=5.0,
                                      alibi_slopes=np.ones(H, np.float32), block_m=128,
                                      block_n=128)
    assert (" : tensor<128x128xi32> to" not in kernel.asm["tile-opt"]) == separated


@pytest.mark.parametrize("causal", [False, True])
def test_gradients_with_flash_arguments(causal):
    # attention_backward takes the same arguments: softcap, ALiBi and a window against the
    # float64 reference backward (score and its derivative written out by hand).
    from tessel.reference import reference_attention_backward
    q, k, v = inputs(4)
    do = np.random.default_rng(5).standard_normal(q.shape).astype(np.float32)
    slopes = np.array([0.05, 0.1, 0.2], np.float32)
    kw = dict(causal=causal, softcap=3.0, alibi_slopes=slopes, window_size=(20, 10))
    o, lse = tessel.attention(q, k, v, return_lse=True, **kw)
    dq, dk, dv = tessel.attention_backward(q, k, v, o, lse, do, **kw)

    def score(s, b, h, qi, ki):
        return 3.0 * np.tanh(s / 3.0) - slopes[h] * np.abs(qi - ki)

    def score_grad(s, b, h, qi, ki):
        return 1.0 - np.tanh(s / 3.0) ** 2

    def allowed(b, h, qi, ki):
        return (ki >= qi - 20) & (ki <= qi + 10)
    want = reference_attention_backward(q, k, v, do, causal=causal, score=score,
                                        score_grad=score_grad, allowed=allowed)
    for got, ref in zip((dq, dk, dv), want):
        assert max_rel_error(got, ref) < 2e-5
