"""Lambdas as mask_mod / score_mod, the FlexAttention habit (issue 14, item 2)."""
import numpy as np
import pytest

from dsl_helpers import assert_located, random_qkv
import tessel
from tessel import _tessel
from tessel import language as tl
from tessel.reference import max_rel_error, reference_attention

pytestmark = pytest.mark.skipif(not _tessel.has_interpreter,
                                reason="this build has no interpreter (branch interp not merged)")

inputs = random_qkv


def located(err, tag, token, message):
    assert_located(err, __file__, tag, token, message)


def test_lambda_with_the_wrong_number_of_arguments_is_reported_at_the_lambda():
    q, k, v = inputs()
    with pytest.raises(tessel.CompilationError) as info:
        tessel.attention(q, k, v, score_mod=lambda s, q_idx, kv_idx: s)  # C6
    located(info.value, "C6", "lambda s", "score_mod is called as score_mod(score, b, h, q_idx, "
                                          "kv_idx): it must take 5 arguments")


def test_lambdas_as_mask_mod_and_score_mod():
    q, k, v = inputs(Nq=33)
    o = tessel.attention(q, k, v, mask_mod=lambda b, h, q_idx, kv_idx: q_idx - kv_idx < 5,
                         score_mod=lambda s, b, h, q_idx, kv_idx: 2.0 * tl.tanh(s / 2.0),
                         causal=True)
    ref = reference_attention(q, k, v, causal=True,
                              allowed=lambda b, h, qi, ki: qi - ki < 5,
                              score=lambda s, b, h, qi, ki: 2.0 * np.tanh(s / 2.0))
    assert max_rel_error(o, ref[0]) < 1e-5


def test_two_lambdas_on_one_line_are_told_apart():
    q, k, v = inputs()
    lo, hi = (lambda b, h, q_idx, kv_idx: kv_idx < 4), (lambda b, h, q_idx, kv_idx: kv_idx >= 4)
    o = tessel.attention(q, k, v, mask_mod=lo)
    assert max_rel_error(o, reference_attention(
        q, k, v, allowed=lambda b, h, qi, ki: np.broadcast_to(ki < 4, (17, 17)))[0]) < 1e-5
    o = tessel.attention(q, k, v, mask_mod=hi)
    assert max_rel_error(o, reference_attention(
        q, k, v, allowed=lambda b, h, qi, ki: np.broadcast_to(ki >= 4, (17, 17)))[0]) < 1e-5


def test_a_lambda_made_per_call_reuses_its_kernel():
    q, k, v = inputs()

    def run(w):
        return tessel.attention(q, k, v, mask_mod=lambda b, h, q_idx, kv_idx: q_idx - kv_idx < w)
    from tessel.attention import attention_kernel
    run(3)
    n = len(attention_kernel.cache)
    o = run(3)
    assert len(attention_kernel.cache) == n
    ref = reference_attention(q, k, v, allowed=lambda b, h, qi, ki: qi - ki < 3)
    assert max_rel_error(o, ref[0]) < 1e-5
    o = run(6)
    ref = reference_attention(q, k, v, allowed=lambda b, h, qi, ki: qi - ki < 6)
    assert max_rel_error(o, ref[0]) < 1e-5


def test_lambdas_inside_kernels_are_still_rejected():
    @tessel.jit
    def k_lambda(x):
        f = lambda a: a  # noqa: E731
    with pytest.raises(tessel.CompilationError, match="lambda is not supported"):
        k_lambda.warmup(np.zeros(4, np.float32))
