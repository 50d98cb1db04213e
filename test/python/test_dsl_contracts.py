"""score_mod / mask_mod contracts checked at the user's code (issue 14, items 1 and 2): a
mask_mod returns booleans, a score_mod floats, of the score block's shape; a wrong number of
arguments is reported at the user's function."""
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


# ---- return types of mask_mod and score_mod ------------------------------------------------

def int_mask(b, h, q_idx, kv_idx):
    return q_idx - kv_idx  # C1


def bool_score(score, b, h, q_idx, kv_idx):
    return score > 0.0  # C2


def int_score(score, b, h, q_idx, kv_idx):
    return q_idx + kv_idx  # C3


def row_mask(b, h, q_idx, kv_idx):
    return tl.arange(0, 8) > 2  # C4


def test_mask_mod_returning_integers_is_a_located_error():
    q, k, v = inputs()
    with pytest.raises(tessel.CompilationError) as info:
        tessel.attention(q, k, v, mask_mod=int_mask)
    located(info.value, "C1", "q_idx - kv_idx", "mask_mod int_mask must return a boolean tile, "
                                                "not an i32 tile")


def test_score_mod_returning_booleans_or_integers_is_a_located_error():
    q, k, v = inputs()
    with pytest.raises(tessel.CompilationError) as info:
        tessel.attention(q, k, v, score_mod=bool_score)
    located(info.value, "C2", "score > 0.0", "score_mod bool_score must return a floating-point")
    with pytest.raises(tessel.CompilationError) as info:
        tessel.attention(q, k, v, score_mod=int_score)
    located(info.value, "C3", "q_idx + kv_idx", "must return a floating-point tile, not an i32")


def test_mask_mod_of_the_wrong_shape_is_a_located_error():
    q, k, v = inputs()
    with pytest.raises(tessel.CompilationError) as info:
        tessel.attention(q, k, v, mask_mod=row_mask)
    located(info.value, "C4", "tl.arange", "of the score block's shape")


def head_zero(b, h, q_idx, kv_idx):
    return h == 0


def everything(b, h, q_idx, kv_idx):
    return True


def test_scalar_and_constant_results_that_broadcast_are_accepted():
    q, k, v = inputs()
    o = tessel.attention(q, k, v, mask_mod=head_zero)
    ref = reference_attention(q, k, v, allowed=lambda b, h, qi, ki: np.full((1, 1), h == 0))
    assert max_rel_error(o, ref[0]) < 1e-5
    o = tessel.attention(q, k, v, mask_mod=everything)
    assert max_rel_error(o, reference_attention(q, k, v)[0]) < 1e-5


# ---- the number of arguments, reported at the user's function -------------------------------

def three_args(b, q_idx, kv_idx):  # C5
    return q_idx >= kv_idx


def test_mask_mod_with_the_wrong_number_of_arguments_is_reported_at_its_def():
    q, k, v = inputs()
    with pytest.raises(tessel.CompilationError) as info:
        tessel.attention(q, k, v, mask_mod=three_args)
    located(info.value, "C5", "def three_args",
            "mask_mod is called as mask_mod(b, h, q_idx, kv_idx): it must take 4 arguments")
