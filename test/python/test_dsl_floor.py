"""`//` and `%` on integers have Python's semantics (floor), on tiles and scalars, with a
compile-time or a run-time divisor (issue 14, item 1)."""
import numpy as np
import pytest

from dsl_helpers import random_qkv
import tessel
from tessel import _tessel
from tessel import language as tl
from tessel.reference import max_rel_error, reference_attention

pytestmark = pytest.mark.skipif(not _tessel.has_interpreter,
                                reason="this build has no interpreter (branch interp not merged)")

inputs = random_qkv


# ---- // and % on integers: Python's floor semantics -----------------------------------------

@tessel.jit
def divmod_kernel(a, b, quot, rem, n, DIVISOR: tl.constexpr):
    da = tl.make_desc(a, shape=(n,), strides=(1,))
    db = tl.make_desc(b, shape=(n,), strides=(1,))
    dq = tl.make_desc(quot, shape=(n,), strides=(1,))
    dr = tl.make_desc(rem, shape=(n,), strides=(1,))
    x = tl.load(da, (0,), shape=(32,)).to(tl.int32)
    y = tl.load(db, (0,), shape=(32,)).to(tl.int32)
    if DIVISOR is not None:
        tl.store(dq, (0,), (x // DIVISOR).to(tl.float32))
        tl.store(dr, (0,), (x % DIVISOR).to(tl.float32))
    else:
        tl.store(dq, (0,), (x // y).to(tl.float32))
        tl.store(dr, (0,), (x % y).to(tl.float32))


@pytest.mark.parametrize("divisor", [None, 4, -3, 1])
def test_floor_division_and_modulo_follow_python(divisor):
    rng = np.random.default_rng(1)
    a = rng.integers(-20, 21, 32).astype(np.float32)
    b = rng.choice([-7, -3, -1, 1, 2, 5], 32).astype(np.float32)
    q = np.zeros(32, np.float32)
    r = np.zeros(32, np.float32)
    divmod_kernel[(1,)](a, b, q, r, 32, DIVISOR=divisor)
    d = b.astype(np.int64) if divisor is None else divisor
    assert np.array_equal(q, a.astype(np.int64) // d)
    assert np.array_equal(r, a.astype(np.int64) % d)


def every_fourth(b, h, q_idx, kv_idx):
    return (q_idx - kv_idx) % 4 == 1


def test_modulo_in_a_mask_mod_has_python_semantics():
    q, k, v = inputs(Nq=24)
    o = tessel.attention(q, k, v, mask_mod=every_fourth)
    ref = reference_attention(q, k, v, allowed=lambda b, h, qi, ki: (qi - ki) % 4 == 1)
    assert max_rel_error(o, ref[0]) < 1e-5


@tessel.jit
def scalar_divmod(out, a, b):
    d = tl.make_desc(out, shape=(4,), strides=(1,))
    t = tl.zeros((4,), tl.int32)
    i = tl.arange(0, 4)
    t = tl.where(i == 0, a // b, t)
    t = tl.where(i == 1, a % b, t)
    t = tl.where(i == 2, tl.cdiv(a, 4), t)
    t = tl.where(i == 3, a // 3 + a % 3, t)
    tl.store(d, (0,), t.to(tl.float32))


@pytest.mark.parametrize("a,b", [(-7, 2), (7, -2), (-7, -2), (7, 2), (-8, 4), (0, -5)])
def test_scalar_floor_division(a, b):
    out = np.zeros(4, np.float32)
    scalar_divmod[(1,)](out, a, b)
    assert list(out) == [a // b, a % b, -(-a // 4), a // 3 + a % 3]
