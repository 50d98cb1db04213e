"""The attention backward on the interpreter (issue 11).

tessel.attention_backward runs the three derived programs (Δ, dK/dV, dQ; python/tessel/
backward.py) after tile-optimize. Each case: fresh random float32 inputs; the forward by
tessel.attention (o, lse); the gradients of loss = Σ o∘do (+ Σ lse∘dlse) compared with an
independent float64 numpy backward (tessel.reference.reference_attention_backward), which is
itself checked against central finite differences of the float64 forward on small inputs.
score_mods are differentiated by the compiler (tl.elementwise_grad); the reference is given
their derivatives by hand.
"""
import numpy as np
import pytest

import dsl_helpers  # (puts the built package on sys.path; needs_ptxas)
import tessel
from tessel.backward import _attention_backward_host
from tessel import _tessel
from tessel import language as tl
from tessel.reference import (max_rel_error, reference_attention,
                              reference_attention_backward)

pytestmark = pytest.mark.skipif(not _tessel.has_interpreter,
                                reason="this build has no interpreter")

WINDOW = 5
PREFIX = 4
CAP = 2.0


@tessel.jit
def alibi(score, b, h, q_idx, kv_idx):
    slope = tl.exp2(-(h + 1).to(tl.float32))
    return score + slope * (kv_idx - q_idx).to(tl.float32)


@tessel.jit
def softcap(score, b, h, q_idx, kv_idx):
    return CAP * tl.tanh(score / CAP)


@tessel.jit
def scale_mul(score, b, h, q_idx, kv_idx):
    return score * 1.5


@tessel.jit
def softcap_alibi_clamped(score, b, h, q_idx, kv_idx):
    # several rules at once: exp/log, max, where on the score, a per-element bias
    t = tl.log(tl.exp(CAP * tl.tanh(score / CAP)))
    t = tl.maximum(t, -1.5)
    return tl.where(score > 0.0, t, 0.5 * t) + (kv_idx - q_idx).to(tl.float32) * 0.1


@tessel.jit
def sliding_window(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx < WINDOW)


@tessel.jit
def prefix_lm(b, h, q_idx, kv_idx):
    return (kv_idx < PREFIX) | (q_idx >= kv_idx)


def _np_alibi(s, b, h, qi, ki):
    return s + 2.0 ** -(h + 1) * (ki - qi)


def _np_softcap(s, b, h, qi, ki):
    return CAP * np.tanh(s / CAP)


def _np_clamped(s, b, h, qi, ki):
    t = np.maximum(CAP * np.tanh(s / CAP), -1.5)
    return np.where(s > 0, t, 0.5 * t) + (ki - qi) * 0.1


def _np_clamped_grad(s, b, h, qi, ki):
    t = CAP * np.tanh(s / CAP)
    g = np.where(t >= -1.5, 1.0 - np.tanh(s / CAP) ** 2, 0.0)
    return np.where(s > 0, g, 0.5 * g)


# name -> (score_mod, mask_mod, causal, numpy score, numpy score derivative, numpy mask)
CASES = {
    "none": (None, None, False, None, None, None),
    "causal": (None, None, True, None, None, None),
    "window": (None, sliding_window, False, None, None,
               lambda b, h, qi, ki: (qi >= ki) & (qi - ki < WINDOW)),
    "prefix_lm": (None, prefix_lm, False, None, None,
                  lambda b, h, qi, ki: (ki < PREFIX) | (qi >= ki)),
    "alibi_causal": (alibi, None, True, _np_alibi, lambda s, b, h, qi, ki: np.ones_like(s), None),
    "softcap": (softcap, None, False, _np_softcap,
                lambda s, b, h, qi, ki: 1.0 - np.tanh(s / CAP) ** 2, None),
    "scale_mul": (scale_mul, None, False, lambda s, b, h, qi, ki: 1.5 * s,
                  lambda s, b, h, qi, ki: np.full_like(s, 1.5), None),
    "mixed_window": (softcap_alibi_clamped, sliding_window, False, _np_clamped, _np_clamped_grad,
                     lambda b, h, qi, ki: (qi >= ki) & (qi - ki < WINDOW)),
}


def inputs(B, H, Hkv, Nq, Nk, D, seed, Ev=None):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((B, H, Nq, D)).astype(np.float32)
    k = rng.standard_normal((B, Hkv, Nk, D)).astype(np.float32)
    v = rng.standard_normal((B, Hkv, Nk, Ev or D)).astype(np.float32)
    do = rng.standard_normal((B, H, Nq, Ev or D)).astype(np.float32)
    return q, k, v, do


def run_case(name, B, H, Hkv, Nq, Nk, D, seed, block=None, dlse=None, keyrows=False,
             fused_dq=False, block_dim=0, Ev=None):
    score_mod, mask_mod, causal, score, score_grad, allowed = CASES[name]
    q, k, v, do = inputs(B, H, Hkv, Nq, Nk, D, seed, Ev)
    gqa = H != Hkv
    kw = dict(causal=causal, score_mod=score_mod, mask_mod=mask_mod, enable_gqa=gqa)
    blocks = dict(block_m=block, block_n=block) if block else {}
    o, lse = tessel.attention(q, k, v, return_lse=True, **kw, **blocks)
    if keyrows:   # the fast paths' dK/dV program (keys as rows), on the interpreter
        dq, dk, dv = _attention_backward_host(q, k, v, o, lse, do, causal, None, score_mod,
                                              mask_mod, gqa, dlse, block, block, keyrows=True,
                                              fused_dq=fused_dq, block_dim=block_dim)
    else:
        dq, dk, dv = tessel.attention_backward(q, k, v, o, lse, do, dlse=dlse, **kw, **blocks)
    ref = reference_attention_backward(q, k, v, do, causal=causal, score=score,
                                       score_grad=score_grad, allowed=allowed, enable_gqa=gqa,
                                       dlse=dlse)
    for got, want, what in zip((dq, dk, dv), ref, ("dq", "dk", "dv")):
        assert got.dtype == np.float32 and got.shape == want.shape, what
        assert np.all(np.isfinite(got)), what
        err = max_rel_error(got, want)
        assert err < 2e-5, (name, what, err)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("n", [1, 17, 40])
def test_backward_matches_float64_reference(name, n):
    run_case(name, B=1, H=2, Hkv=2, Nq=n, Nk=n, D=16, seed=n)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("n", [17, 40])
def test_key_rows_program_matches_float64_reference(name, n):
    """attention_bwd_dkdv_keyrows, the dK/dV program the GPU fast paths run (Sᵀ = K·Qᵀ, the LSE
    and Δ as column vectors), against the same float64 backward."""
    run_case(name, B=1, H=2, Hkv=2, Nq=n, Nk=n, D=16, seed=n, block=16, keyrows=True)


@pytest.mark.parametrize("keyrows", [False, True], ids=["dkdv", "keyrows"])
@pytest.mark.parametrize("name", list(CASES))
def test_whole_blocks_drop_the_bounds_mask(name, keyrows, monkeypatch):
    """Lengths that are multiples of the blocks run the key-rows and dQ programs without
    their bounds mask (backward.even_blocks: EVEN, where the bounds are the only mask): within
    the float64 reference, and the masked form's bits, bit for bit (the bounds mask is all
    true there)."""
    from tessel import backward
    plain = dict(BLOCK_M=16, BLOCK_N=16, CAUSAL=False, SCORE_MOD=softcap, MASK_MOD=None)
    shapes = (2, 4, 48, 16, 2, 32)
    assert backward.even_blocks(shapes, plain, dict(plain, BLOCK_N=32)) == ({"EVEN": True},
                                                                           {"EVEN": True})
    assert backward.even_blocks((2, 4, 40, 16, 2, 32), plain, dict(plain, BLOCK_N=64)) == \
        ({}, {})
    assert backward.even_blocks(shapes, dict(plain, CAUSAL=True), plain) == ({}, {})
    assert backward.even_blocks(shapes, dict(plain, MASK_MOD=sliding_window), plain) == ({}, {})
    # Not causal and without mods the key-rows program has no bounds mask: no EVEN form.
    assert backward.even_blocks(shapes, dict(plain, SCORE_MOD=None), plain) == ({},
                                                                               {"EVEN": True})
    run_case(name, B=2, H=4, Hkv=2, Nq=48, Nk=32, D=16, seed=5, block=16, keyrows=keyrows)
    _assert_switch_keeps_the_bits(monkeypatch, "EVEN_BLOCKS", name, 5, keyrows)


def _assert_switch_keeps_the_bits(monkeypatch, switch, name, seed, keyrows):
    """The backward of CASES[name] (B 2, H 4 on 2, Nq 48, Nk 32, D 16, blocks of 16) with
    backward.<switch> on and off: the same bits."""
    from tessel import backward
    score_mod, mask_mod, causal, *_ = CASES[name]
    q, k, v, do = inputs(2, 4, 2, 48, 32, 16, seed)
    o, lse = tessel.attention(q, k, v, causal=causal, score_mod=score_mod, mask_mod=mask_mod,
                              enable_gqa=True, return_lse=True, block_m=16, block_n=16)
    got = {}
    for on in (True, False):
        monkeypatch.setattr(backward, switch, on)
        got[on] = _attention_backward_host(q, k, v, o, lse, do, causal, None, score_mod,
                                           mask_mod, True, None, 16, 16, keyrows=keyrows)
    for a, b in zip(got[True], got[False]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["causal", "alibi_causal"])
def test_causal_whole_blocks_drop_the_bounds_mask(name, monkeypatch):
    """backward.EVEN_CAUSAL (off until measured): causal calls at whole blocks run the key-rows
    program without its bounds mask (the diagonal's causal mask stays): the float64
    reference, and the masked form's bits."""
    from tessel import backward
    plain = dict(BLOCK_M=16, BLOCK_N=16, CAUSAL=True, SCORE_MOD=None, MASK_MOD=None)
    shapes = (2, 4, 48, 16, 2, 32)
    assert backward.even_blocks(shapes, plain, plain) == ({}, {})
    monkeypatch.setattr(backward, "EVEN_CAUSAL", True)
    assert backward.even_blocks(shapes, plain, plain) == ({"EVEN": True}, {})
    assert backward.even_blocks((2, 4, 40, 16, 2, 32), plain, plain) == ({}, {})
    assert backward.even_blocks(shapes, dict(plain, MASK_MOD=sliding_window), plain) == ({}, {})
    run_case(name, B=2, H=4, Hkv=2, Nq=48, Nk=32, D=16, seed=6, block=16, keyrows=True)
    _assert_switch_keeps_the_bits(monkeypatch, "EVEN_CAUSAL", name, 6, True)


def test_key_rows_program_without_bounds_mask_past_the_lengths():
    """Not causal and without mods the key-rows program runs no bounds mask (its docstring):
    keys past Nk see zeros for K, so with every score far below 0 their P = 2^(0 - LSE)
    overflows to inf and their dK/dV rows are inf and NaN — rows the store drops, which must
    not reach the gradients (the same rule in the dQ program, which sums over the keys, fails
    here); queries past Nq read zero Q, dO, LSE and Δ and add exact zeros."""
    from tessel.reference import reference_attention_backward as ref_bwd
    rng = np.random.default_rng(21)
    B, H, Nq, Nk, D = 1, 2, 23, 19, 16
    k = (1.0 + 0.05 * rng.standard_normal((B, H, Nk, D))).astype(np.float32)
    q = (-40.0 + rng.standard_normal((B, H, Nq, D))).astype(np.float32)  # scores near -160
    v, do = (rng.standard_normal((B, H, n, D)).astype(np.float32) for n in (Nk, Nq))
    o, lse = tessel.attention(q, k, v, return_lse=True)
    assert lse.max() < -100                      # 2^(-LSE·log2 e) is past float32's range
    got = _attention_backward_host(q, k, v, o, lse, do, False, None, None, None, False, None,
                                   16, 16, keyrows=True)
    want = ref_bwd(q, k, v, do)
    for g, w, what in zip(got, want, ("dq", "dk", "dv")):
        assert np.all(np.isfinite(g)), what
        assert max_rel_error(g, w) < 2e-4, what


@pytest.mark.parametrize("name", ["causal", "alibi_causal", "window"])
def test_key_rows_program_gqa_and_ragged_lengths(name):
    """GQA (one dK/dV block per query head, summed over the group after) and Nq ≠ Nk both
    ways, with a gradient on the LSE."""
    rng = np.random.default_rng(2)
    run_case(name, B=2, H=4, Hkv=2, Nq=23, Nk=19, D=8, seed=7, block=16, keyrows=True,
             dlse=rng.standard_normal((2, 4, 23)).astype(np.float32))
    run_case(name, B=1, H=1, Hkv=1, Nq=9, Nk=37, D=16, seed=3, block=16, keyrows=True)
    run_case(name, B=1, H=1, Hkv=1, Nq=37, Nk=9, D=16, seed=4, block=16, keyrows=True)


@pytest.mark.parametrize("name", ["causal", "alibi_causal", "window"])
def test_key_rows_program_in_two_parts(name, monkeypatch):
    """backward.SPLIT_KEYROWS: dV and dK by two programs (PART 1 and 2), each against the same
    float64 backward, GQA and ragged lengths included."""
    from tessel import backward as bw
    monkeypatch.setattr(bw, "SPLIT_KEYROWS", (8, 16))
    run_case(name, B=2, H=4, Hkv=2, Nq=23, Nk=19, D=8, seed=7, block=16, keyrows=True)
    run_case(name, B=1, H=2, Hkv=2, Nq=40, Nk=40, D=16, seed=40, block=16, keyrows=True)


@pytest.mark.parametrize("name", ["none", "causal", "alibi_causal", "softcap", "window"])
def test_split_dk_program_with_query_blocks_of_its_own(name, monkeypatch):
    """backward.KEYROWS_DK_BLOCK_M: the split's dK program (PART 2) streams query blocks of
    its own size (half the dV program's, the d256 candidate), against float64 — the causal
    diagonal then crosses two of its query blocks; GQA and ragged lengths included."""
    from tessel import backward as bw
    monkeypatch.setattr(bw, "SPLIT_KEYROWS", (8, 16))
    monkeypatch.setattr(bw, "KEYROWS_DK_BLOCK_M", {8: 8, 16: 8})
    launched = []
    real = bw._keyrows_program
    monkeypatch.setattr(bw, "_keyrows_program",
                        lambda chip, D, part, cx, fused: launched.append((part, cx["BLOCK_M"]))
                        or real(chip, D, part, cx, fused))
    run_case(name, B=2, H=4, Hkv=2, Nq=23, Nk=19, D=8, seed=7, block=16, keyrows=True)
    run_case(name, B=1, H=2, Hkv=2, Nq=40, Nk=40, D=16, seed=40, block=16, keyrows=True)
    assert set(launched) == {(1, 16), (2, 8)}


@pytest.mark.parametrize("name", ["none", "causal", "alibi_causal", "softcap", "window"])
@pytest.mark.parametrize("split", [False, True], ids=["one", "two_parts"])
def test_value_head_dim_of_its_own(name, split, monkeypatch):
    """v (o, dO) narrower than q: the key-rows and dQ programs' DV (dP and dV at v's width;
    two parts as SPLIT_KEYROWS runs them at 192), GQA and ragged lengths; the public
    attention_backward, whose reference programs pad v, o and dO instead."""
    from tessel import backward as bw
    if split:
        monkeypatch.setattr(bw, "SPLIT_KEYROWS", (16,))
    padded = bw._value_dim_padded
    monkeypatch.setattr(bw, "_value_dim_padded", lambda *a: pytest.fail("padded"))
    run_case(name, B=2, H=4, Hkv=2, Nq=23, Nk=19, D=16, seed=7, block=16, keyrows=True, Ev=8)
    run_case(name, B=1, H=2, Hkv=2, Nq=40, Nk=33, D=16, seed=4, block=16, keyrows=True, Ev=8)
    monkeypatch.setattr(bw, "_value_dim_padded", padded)
    if not split:
        run_case(name, B=2, H=4, Hkv=2, Nq=23, Nk=19, D=16, seed=9, block=16, Ev=8)


def test_value_head_dim_wider_than_q_is_refused():
    q, k, v, do = inputs(1, 1, 1, 8, 8, 8, 0, Ev=16)
    o, lse = tessel.attention(q, k, v, return_lse=True)
    with pytest.raises(ValueError, match="wider than q's"):
        tessel.attention_backward(q, k, v, o, lse, do)


@pytest.mark.parametrize("name", ["none", "causal", "alibi_causal", "softcap", "window"])
def test_key_rows_program_with_fused_dq(name):
    """FUSED_DQ: dQ added up in the key-rows program by atomics (dQᵀ = Kᵀ·dSᵀ, K read
    transposed) instead of by the dQ program — square, GQA and ragged lengths both ways, with a
    gradient on the LSE."""
    rng = np.random.default_rng(5)
    run_case(name, B=1, H=2, Hkv=2, Nq=40, Nk=40, D=16, seed=40, block=16, keyrows=True,
             fused_dq=True)
    run_case(name, B=2, H=4, Hkv=2, Nq=23, Nk=19, D=8, seed=7, block=16, keyrows=True,
             fused_dq=True, dlse=rng.standard_normal((2, 4, 23)).astype(np.float32))
    run_case(name, B=1, H=1, Hkv=1, Nq=9, Nk=37, D=16, seed=3, block=16, keyrows=True,
             fused_dq=True)
    # Past head dim 64: dQᵀ in two halves of the head dim (K's half columns).
    run_case(name, B=1, H=2, Hkv=1, Nq=20, Nk=33, D=128, seed=9, block=16, keyrows=True,
             fused_dq=True)


@pytest.mark.parametrize("name", ["none", "causal", "alibi_causal", "softcap", "window"])
def test_backward_blocks_wider_than_the_head_dim(name, monkeypatch):
    """The programs' DB (backward.BLOCK_HEAD_DIM_CHIPS: what a CUDA backward at head dim 96,
    80 or 40 runs): head dim 24 read in blocks 32 wide (q, k, v, dO; o by the Δ program),
    columns past 24 as 0, dq, dk and dv stored 24 wide — against float64, GQA and ragged
    lengths, a gradient on the LSE, the key-rows program whole and in two parts. A DB
    narrower than D (16) fails it."""
    from tessel import backward as bw
    rng = np.random.default_rng(3)
    run_case(name, B=2, H=4, Hkv=2, Nq=23, Nk=19, D=24, seed=7, block=16, keyrows=True,
             block_dim=32, dlse=rng.standard_normal((2, 4, 23)).astype(np.float32))
    run_case(name, B=1, H=2, Hkv=2, Nq=40, Nk=40, D=24, seed=40, block=16, keyrows=True,
             block_dim=32)
    monkeypatch.setattr(bw, "SPLIT_KEYROWS", (32,))     # (the blocks' head dim decides)
    launched = []
    real = bw._keyrows_program
    monkeypatch.setattr(bw, "_keyrows_program", lambda chip, D, part, cx, fused:
                        launched.append((D, part, cx["DB"])) or real(chip, D, part, cx, fused))
    run_case(name, B=1, H=2, Hkv=1, Nq=20, Nk=33, D=24, seed=9, block=16, keyrows=True,
             block_dim=32)
    assert launched == [(32, 1, 32), (32, 2, 32)]
    with pytest.raises(AssertionError):
        run_case(name, B=1, H=1, Hkv=1, Nq=17, Nk=17, D=24, seed=5, block=16, keyrows=True,
                 block_dim=16)


@pytest.mark.parametrize("name", ["none", "causal", "alibi_causal", "window"])
def test_backward_gqa_sums_over_the_group(name):
    run_case(name, B=2, H=4, Hkv=2, Nq=23, Nk=19, D=8, seed=7, block=16)


@pytest.mark.parametrize("name", ["causal", "softcap"])
def test_backward_query_and_key_lengths_differ(name):
    # causal with more keys than queries leaves whole key blocks unseen (their dK, dV are 0);
    # more queries than keys, a row per query past the last key
    run_case(name, B=1, H=1, Hkv=1, Nq=9, Nk=37, D=16, seed=3, block=16)
    run_case(name, B=1, H=1, Hkv=1, Nq=37, Nk=9, D=16, seed=4, block=16)


def test_backward_with_lse_gradient():
    rng = np.random.default_rng(11)
    dlse = rng.standard_normal((1, 2, 21)).astype(np.float32)
    run_case("causal", B=1, H=2, Hkv=2, Nq=21, Nk=21, D=8, seed=11, dlse=dlse)


def test_backward_long_sequence_non_multiple_of_block():
    run_case("causal", B=1, H=1, Hkv=1, Nq=1000, Nk=1000, D=8, seed=5)


def test_fully_masked_rows_give_zero_gradients():
    # causal with the diagonal moved off: query i sees keys > i + 100, i.e. none
    @tessel.jit
    def nothing(b, h, q_idx, kv_idx):
        return kv_idx > q_idx + 100

    q, k, v, do = inputs(1, 1, 1, 20, 20, 8, 0)
    o, lse = tessel.attention(q, k, v, mask_mod=nothing, return_lse=True)
    assert np.all(lse == -np.inf)
    dq, dk, dv = tessel.attention_backward(q, k, v, o, lse, do, mask_mod=nothing)
    for g in (dq, dk, dv):
        assert np.all(g == 0.0)


@pytest.mark.parametrize("name", ["none", "window", "mixed_window", "alibi_causal"])
def test_reference_backward_matches_finite_differences(name):
    """The float64 numpy backward the interpreter is checked against is itself right: central
    differences of loss = Σ o∘do + Σ lse∘dlse in float64."""
    score_mod, mask_mod, causal, score, score_grad, allowed = CASES[name]
    q, k, v, do = (x.astype(np.float64) for x in inputs(1, 2, 1, 6, 7, 4, 1))
    dlse = np.random.default_rng(2).standard_normal((1, 2, 6))

    def loss(q, k, v):
        o, lse = reference_attention(q, k, v, causal=causal, score=score, allowed=allowed,
                                     enable_gqa=True)
        return float(np.sum(o * do) + np.sum(np.where(np.isfinite(lse), lse, 0.0) * dlse))

    grads = reference_attention_backward(q, k, v, do, causal=causal, score=score,
                                         score_grad=score_grad, allowed=allowed,
                                         enable_gqa=True, dlse=dlse)
    eps = 1e-6
    for which, g in enumerate(grads):
        args = [q, k, v]
        x = args[which]
        fd = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            saved = x[idx]
            x[idx] = saved + eps
            up = loss(*args)
            x[idx] = saved - eps
            down = loss(*args)
            x[idx] = saved
            fd[idx] = (up - down) / (2 * eps)
        assert np.max(np.abs(fd - g)) < 1e-6 * max(1.0, np.max(np.abs(g))), (name, which)


def test_masked_blocks_are_skipped_in_the_backward():
    """The dK/dV and dQ loops mask with select(mask, s, -inf): tile-split-masked-loops classifies
    their blocks like the forward's, so causal runs all-true blocks without the mask and never
    visits the blocks above the diagonal."""
    q, k, v, _ = inputs(1, 1, 1, 128, 128, 16, 0)
    kernels = tessel.compile_attention_backward(q, k, v, causal=True)
    for which in ("dkdv", "dq"):
        opt = kernels[which].asm["tile-opt"]
        assert 'tile.block_mask = "all_true"' in opt, which
        assert 'tile.block_mask = "mixed"' in opt, which


def test_score_mod_derivative_is_built_from_its_ops():
    q, k, v, _ = inputs(1, 1, 1, 16, 16, 16, 0)
    ir = tessel.compile_attention_backward(q, k, v, score_mod=softcap)["dq"].asm["tile"]
    assert ir.count("math.tanh") == 1        # the forward's tanh, reused by the derivative
    assert "arith.subf" in ir                # 1 - tanh^2


@tessel.jit
def not_differentiable(score, b, h, q_idx, kv_idx):
    return score - tl.expand_dims(tl.max(score, 1), 1)


def test_unsupported_score_mod_op_is_a_located_error():
    q, k, v, do = inputs(1, 1, 1, 16, 16, 16, 0)
    o, lse = np.zeros_like(q), np.zeros((1, 1, 16), np.float32)   # never read: tracing fails
    with pytest.raises(tessel.CompilationError) as err:
        tessel.attention_backward(q, k, v, o, lse, do, score_mod=not_differentiable)
    e = err.value
    assert "cannot differentiate 'tile.broadcast'" in e.message
    assert e.filename.endswith("test_attention_backward.py")
    assert e.source_line.strip() == "return score - tl.expand_dims(tl.max(score, 1), 1)"


def test_autograd_checks_the_score_mod_before_the_forward_runs():
    """On CUDA tensors that require grad, tessel.attention traces the chain rule through the
    score_mod first (tessel.backward.check_differentiable): the error is at the forward call."""
    from tessel.backward import check_differentiable
    check_differentiable(softcap, "bf16", 64)          # differentiable: no error, remembered
    with pytest.raises(tessel.CompilationError, match="cannot differentiate 'tile.broadcast'"):
        check_differentiable(not_differentiable, "f16", 64)


def test_elementwise_grad_in_a_kernel():
    @tessel.jit
    def grad_kernel(x, y, W: tl.constexpr):
        d = tl.make_desc(x, shape=(W,), strides=(1,))
        e = tl.make_desc(y, shape=(W,), strides=(1,))
        t = tl.load(d, (0,), shape=(W,))
        u = tl.sqrt(t * t + 1.0) * tl.exp2(t) - tl.minimum(t, 0.25) / (t + 3.0)
        tl.store(e, (0,), tl.elementwise_grad(u, t))

    x = np.linspace(-1, 1, 16).astype(np.float32)
    y = np.zeros_like(x)
    grad_kernel[(1,)](x, y, W=16)
    t = x.astype(np.float64)
    want = (t / np.sqrt(t * t + 1) * 2 ** t + np.sqrt(t * t + 1) * 2 ** t * np.log(2)
            - np.where(t <= 0.25, 1.0, 0.0) / (t + 3) + np.minimum(t, 0.25) / (t + 3) ** 2)
    assert np.max(np.abs(y - want)) < 1e-5


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_backward_half_precision_inputs(dtype):
    """f16 and bf16 (uint16 bits) inputs: P and dS are rounded to the inputs' type before their
    matmuls, as FlashAttention does; the gradients come back in the inputs' type."""
    q, k, v, do = inputs(1, 2, 1, 33, 33, 16, 9)
    if dtype == "f16":
        to, back = (lambda x: x.astype(np.float16)), (lambda x: x.astype(np.float32))
    else:
        to, back = tessel.to_bf16, tessel.from_bf16
    qh, kh, vh, doh = (to(x) for x in (q, k, v, do))
    o, lse = tessel.attention(qh, kh, vh, causal=True, enable_gqa=True, return_lse=True,
                              score_mod=softcap)
    dq, dk, dv = tessel.attention_backward(qh, kh, vh, o, lse, doh, causal=True, enable_gqa=True,
                                           score_mod=softcap)
    assert dq.dtype == qh.dtype and dk.dtype == kh.dtype
    ref = reference_attention_backward(*(back(x) for x in (qh, kh, vh, doh)), causal=True,
                                       score=_np_softcap, enable_gqa=True,
                                       score_grad=lambda s, b, h, qi, ki:
                                       1.0 - np.tanh(s / CAP) ** 2)
    tol = 1e-2 if dtype == "f16" else 4e-2
    for got, want in zip((dq, dk, dv), ref):
        assert max_rel_error(back(got), want) < tol


def test_backward_programs_compile_for_the_gpu():
    """The GPU runs the backward programs through the reference lowering, which keeps live tiles
    in shared memory: at the blocks gpu_backward_blocks picks they fit a CTA and ptxas accepts
    them. One case, the largest (f32, d128, on sm_80's 163 KB): ptxas takes ~8 s a program here.
    By hand on 2026-12-01, f16/bf16/f32 at d64 and d128 on sm_80, and f16 d128 on sm_90a, passed
    too (codegen auto leaves these programs to the reference lowering: no mma/wgmma in the PTX)."""
    from tessel.backward import gpu_backward_blocks
    from tessel.cache import GpuOptions
    bm, bn = gpu_backward_blocks(128, "f32")
    q = np.zeros((1, 2, 100, 128), np.float32)
    kernels = tessel.compile_attention_backward(q, q, q, causal=True, score_mod=softcap,
                                                block_m=bm, block_n=bn)
    for which, kernel in kernels.items():
        binary = kernel.binary(GpuOptions(chip="sm_80"))
        assert "mma.sync" not in binary.ptx, which


@pytest.mark.parametrize("dtype,D,causal,chip,marker", [
    ("f16", 64, True, "sm_80", "mma.sync"), ("bf16", 128, False, "sm_80", "mma.sync"),
    ("f16", 128, True, "sm_90a", "wgmma.mma_async")])
def test_fast_backward_programs_take_the_fast_paths(dtype, D, causal, chip, marker):
    """The dQ and key-rows dK/dV programs at the blocks the CUDA backward uses for f16/bf16
    (FAST_BACKWARD_BLOCKS) are in the fast paths' class: codegen auto lowers them with mma.sync
    (sm_80) or wgmma (sm_90a), not the reference lowering (which could not hold 64×64 blocks)."""
    from tessel.backward import (FAST_BACKWARD_BLOCKS, FAST_DQ_BLOCKS_SM90,
                                 attention_bwd_dkdv_keyrows, attention_bwd_dq, _config)
    from tessel.cache import GpuOptions
    host = {"f16": np.float16, "bf16": np.uint16}[dtype]
    q = np.zeros((1, 2, 100, D), host)
    row = np.zeros((1, 2, 100), np.float32)
    shapes, scale, cx = _config(q, q, q, causal, None, softcap, None, False,
                                *FAST_BACKWARD_BLOCKS[D])
    kernels = {
        "dq": attention_bwd_dq.warmup(q, q, q, q, row, row, q, 100, 100, 2, 2, scale, **cx),
        "dkdv": attention_bwd_dkdv_keyrows.warmup(q, q, q, q, row, row, q, q, q, 100, 100, 2,
                                                   2, 2, scale, **cx)}
    if chip == "sm_90a" and D in FAST_DQ_BLOCKS_SM90:      # the dQ program's own blocks there
        _, _, dq_cx = _config(q, q, q, causal, scale, softcap, None, False,
                              *FAST_DQ_BLOCKS_SM90[D])
        kernels["dq own blocks"] = attention_bwd_dq.warmup(q, q, q, q, row, row, q, 100, 100, 2,
                                                           2, scale, **dq_cx)
    for which, kernel in kernels.items():
        ptx = kernel.binary(GpuOptions(chip=chip)).ptx
        assert marker in ptx, which


def test_fast_backward_route_is_chosen_by_dtype_head_dim_and_blocks():
    """Which CUDA backward takes the fast paths (decided on the host, no GPU needed): fp16/bf16
    at d64/d128 with the default or 64/128 blocks; fp32, other head dims and blocks the fast
    paths do not take (32) keep the reference route."""
    torch = pytest.importorskip("torch")
    from tessel.backward import FAST_BACKWARD_BLOCKS, _fast_backward_config

    def route(dtype, D, **blocks):
        q = torch.zeros(1, 2, 64, D, dtype=dtype)
        return _fast_backward_config(q, q, q, False, None, None, None, False, **blocks)

    for dtype in (torch.float16, torch.bfloat16):
        for D in (64, 128):
            shapes, scale, cx = route(dtype, D)
            assert (cx["BLOCK_M"], cx["BLOCK_N"]) == FAST_BACKWARD_BLOCKS[D]
            assert scale == pytest.approx(D ** -0.5)
        assert route(dtype, 64, block_m=128)[2]["BLOCK_M"] == 128
        assert route(dtype, 64, block_m=32) is None
        assert route(dtype, 96) is None
    assert route(torch.float32, 64) is None


def test_native_192_backward_is_routed_where_listed(monkeypatch):
    """backward.NATIVE_BACKWARD_HEAD_DIMS (192 on sm_90a since its GPU check): with 192 listed for
    sm_90a, the fast backward takes d192 as it is, its key-rows program split (dV, then dK),
    and tessel.attention runs d192 natively with gradients too; unlisted, or on sm_80, the
    backward keeps the reference route and the forward with gradients pads to 256."""
    torch = pytest.importorskip("torch")
    import importlib
    from tessel import backward
    attn = importlib.import_module("tessel.attention")
    chip = ["sm_90a"]
    monkeypatch.setattr(attn, "_chip_for_blocks", lambda q: chip[0])
    q = torch.zeros(1, 2, 64, 192, dtype=torch.float16)

    def route():
        return backward._fast_backward_config(q, q, q, True, None, None, None, False)
    assert backward.NATIVE_BACKWARD_HEAD_DIMS == {"sm_90a": (192,)}
    monkeypatch.setattr(backward, "NATIVE_BACKWARD_HEAD_DIMS", {"sm_90a": ()})
    assert route() is None and not attn.native_head_dim(192, "f16", "sm_90a", True, False)
    monkeypatch.setattr(backward, "NATIVE_BACKWARD_HEAD_DIMS", {"sm_90a": (192,)})
    shapes, scale, cx = route()
    assert (cx["D"], cx["BLOCK_M"], cx["BLOCK_N"]) == (192, 64, 64)
    assert scale == pytest.approx(192 ** -0.5)
    assert [p for p, _ in backward.keyrows_launches(shapes, cx, cx)] == [1, 2]
    assert attn.native_head_dim(192, "f16", "sm_90a", True, False)
    # As the forward, not with a mask_mod (a block mask's too): the reference route as before.
    assert backward._fast_backward_config(q, q, q, True, None, None, lambda b, h, i, j: i >= j,
                                          False) is None
    chip[0] = "sm_80"
    assert route() is None and not attn.native_head_dim(192, "f16", "sm_80", True, False)


def test_padded_head_dims_take_the_fast_backward(monkeypatch):
    """backward.backward_block_dim: a CUDA backward at a head dim the forward pads (96, 80, 40,
    160; 192 where it is not native) runs the fast programs at the padded head dim — inside
    the programs (DB) where BLOCK_HEAD_DIM_CHIPS lists the chip and D is a multiple of 8, else
    on padded copies — and keeps D's scale; 64/128/256 and fp32 are taken as they are. With
    both switches, tessel.attention with gradients pads inside the kernels too."""
    torch = pytest.importorskip("torch")
    import importlib
    from tessel import backward as bw
    attn = importlib.import_module("tessel.attention")
    monkeypatch.setattr(attn, "_chip_for_blocks", lambda q: "sm_90a")

    def route(D, dtype=torch.float16, v_dim=None, mask_mod=None):
        q = torch.zeros(1, 2, 64, D, dtype=dtype)
        v = torch.zeros(1, 2, 64, v_dim or D, dtype=dtype)
        return bw.backward_block_dim(q, q, v, v, v, mask_mod)
    assert bw.BLOCK_HEAD_DIM_CHIPS == ("sm_90a",)
    monkeypatch.setattr(bw, "BLOCK_HEAD_DIM_CHIPS", ())
    assert route(96) == (128, False) and route(160) == (256, False)
    assert route(64) == route(128) == route(256) == route(192) == 0
    assert route(96, torch.float32) == 0 and route(96, v_dim=64) == 0
    assert route(192, mask_mod=lambda b, h, i, j: i >= j) == (256, False)
    monkeypatch.setattr(bw, "BLOCK_HEAD_DIM_CHIPS", ("sm_90a",))
    assert route(96) == (128, True) and route(40) == (64, True)
    assert route(100) == (128, False)              # (not a multiple of 8: copies)
    # A mask_mod: inside where attention.BLOCK_HEAD_DIM_MASKS lets it through (one that reads
    # no tensor), else copies.
    window = lambda b, h, i, j: i - j < 8                            # noqa: E731
    table = np.zeros(4, bool)
    reads = lambda b, h, i, j: table[i % 4]                          # noqa: E731
    assert attn.BLOCK_HEAD_DIM_MASKS and route(96, mask_mod=window) == (128, True)
    monkeypatch.setattr(attn, "BLOCK_HEAD_DIM_MASKS", False)
    assert route(96, mask_mod=window) == (128, False)
    monkeypatch.setattr(attn, "BLOCK_HEAD_DIM_MASKS", True)
    assert route(96, mask_mod=reads) == (128, False)
    q = torch.zeros(1, 2, 64, 96, dtype=torch.float16)
    shapes, scale, cx = bw._fast_backward_config(q, q, q, True, None, None, None, False,
                                                 block_dim=128)
    assert (shapes[3], cx["D"], cx["DB"], cx["BLOCK_M"]) == (96, 96, 128, 64)
    assert scale == pytest.approx(96 ** -0.5)
    assert [p for p, _ in bw.keyrows_launches(shapes, dict(cx, DB=256), cx)] == [1, 2]
    monkeypatch.setattr(attn, "BLOCK_HEAD_DIM_CHIPS", ())
    assert not attn.block_head_dim_takes(q, q, 128, "sm_90a", True, False)
    monkeypatch.setattr(attn, "BLOCK_HEAD_DIM_CHIPS", ("sm_90a",))
    assert attn.block_head_dim_takes(q, q, 128, "sm_90a", True, False)
    monkeypatch.setattr(bw, "BLOCK_HEAD_DIM_CHIPS", ())
    assert not attn.block_head_dim_takes(q, q, 128, "sm_90a", True, False)
    assert attn.block_head_dim_takes(q, q, 128, "sm_90a", False, False)


@dsl_helpers.needs_ptxas()
def test_backward_programs_compile_side_by_side(tmp_path, monkeypatch):
    """Before a backward signature's first call, _compile_programs traces the programs the
    call launches (Δ, dQ, key-rows; nothing runs) and compiles their binaries side by side
    (cache.get_binaries): the binaries a sequential compile makes, in memory for the launches,
    and a second call of the signature compiles nothing. Needs ptxas, not a GPU."""
    from tessel import backward, cache
    from tessel.backward import FAST_DQ_BLOCKS_SM90, _config, _run, _with_blocks
    monkeypatch.setenv("TESSEL_CACHE_DIR", str(tmp_path / "parallel"))
    monkeypatch.setenv("TESSEL_COMPILE_THREADS", "3")
    monkeypatch.setattr(backward, "_compiled", set())
    x = np.zeros((1, 2, 256, 128), np.float16)
    row = np.zeros((1, 2, 256), np.float32)
    shapes, scale, cx = _config(x, x, x, True, None, None, None, False, 64, 64)
    dq_cx = _with_blocks(cx, FAST_DQ_BLOCKS_SM90[128])
    calls, compiled = [], []
    real = cache.get_binaries
    monkeypatch.setattr(cache, "get_binaries",
                        lambda pairs: compiled.extend(pairs) or real(pairs))

    def programs(launch, side=None):
        calls.append(side)
        _run(x, x, x, x, row, x, row, row, x, x, x, shapes, scale, cx, keyrows=True,
             dq_cx=dq_cx, launch=launch, chip="sm_90a")
    for _ in range(2):
        backward._compile_programs("sm_90a", programs,
                                   ("f16", tuple(cx.items()), tuple(dq_cx.items())))
    assert calls == [None] and len(compiled) == 3
    names = [k.name for k, _ in compiled]
    assert names == ["attention_bwd_delta", "attention_bwd_dkdv_keyrows", "attention_bwd_dq"]
    keyrows, options = compiled[1]
    assert not options.spill_fallbacks and "tile.moderate" not in keyrows.asm["tile"]
    parallel = [k.binary(g) for k, g in compiled]
    assert [b.source for b in parallel] == ["memory"] * 3
    cache.forget_memory()
    monkeypatch.setenv("TESSEL_CACHE_DIR", str(tmp_path / "sequential"))
    for (k, g), b in zip(compiled, parallel):
        again = cache.get_binary(k, g)
        assert again.source == "compiled" and (again.ptx, again.cubin) == (b.ptx, b.cubin)


def test_backward_compile_keys_hold_no_tensors():
    """_compile_programs remembers each signature it compiled; a mask_mod's closure over a
    tensor must not be kept alive by that key (the mod is keyed without its function)."""
    import gc
    import weakref
    from tessel import backward
    from tessel.attention import _as_jit

    def key_of_a_mask():
        ids = np.arange(64, dtype=np.int32)

        def same(b, h, q_idx, kv_idx):
            return ids[q_idx] == ids[kv_idx]
        mod = _as_jit(same, "mask_mod")
        assert mod.user_fn is same                   # bound: the kernel reads ids from it
        return backward._hashable(({"D": 64, "MASK_MOD": mod}, "f16")), weakref.ref(ids)
    first, ids = key_of_a_mask()
    gc.collect()
    assert ids() is None
    assert hash(first) == hash(key_of_a_mask()[0]) and first == key_of_a_mask()[0]
