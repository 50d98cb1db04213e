"""Plain Python functions called in a kernel are inlined as @tessel.jit functions (frontend
_plain_jit: FlexAttention's convention for helpers); library functions are not; torch functions
with a tl twin compile as it; x.new_ones(()) / x.new_zeros(()) are constants."""
import numpy as np
import pytest

import dsl_helpers  # noqa: F401 (puts the build's package on the path)
import tessel
from tessel import language as tl


def _scaled(x, factor):
    return x * factor


def _twice_then_add(x, y):
    return _scaled(x, 2.0) + y          # a plain function calling another


@tessel.jit
def k_calls_plain(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    xd = tl.make_desc(x_ptr, shape=(n,), strides=(1,))
    od = tl.make_desc(o_ptr, shape=(n,), strides=(1,))
    x = tl.load(xd, (0,), shape=(BLOCK,))
    one = x.new_ones(())
    tl.store(od, (0,), _twice_then_add(x, one + x.new_zeros((), dtype=tl.float32)))


def test_plain_functions_are_inlined():
    x = np.arange(16, dtype=np.float32)
    o = np.zeros(16, np.float32)
    k_calls_plain[(1,)](x, o, 16, BLOCK=16)
    np.testing.assert_array_equal(o, 2 * x + 1)


@tessel.jit
def k_bad_new_ones(x_ptr):
    y = tl.zeros((4,), tl.float32).new_ones((4,))


def test_new_ones_of_a_shape_is_refused():
    with pytest.raises(tessel.CompilationError, match="new_ones takes only a 0-dim size"):
        k_bad_new_ones.warmup(tessel.DevicePointer(0, "f32"))


def test_torch_twins_compile():
    torch = pytest.importorskip("torch")
    q = torch.randn(1, 1, 16, 8)

    def mod(score, b, h, i, j):
        return torch.where(i >= j, torch.maximum(score, torch.minimum(score, score * 0.5)),
                           torch.exp2(torch.log2(torch.abs(score) + 1.0)))

    s = q[0, 0] @ q[0, 0].T / 8 ** 0.5
    i, j = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
    ref = torch.where(torch.tensor(i >= j), torch.maximum(s, torch.minimum(s, s * 0.5)),
                      torch.abs(s) + 1.0)
    torch.testing.assert_close(tessel.attention(q, q, q, score_mod=mod)[0, 0],
                               torch.softmax(ref, -1) @ q[0, 0], atol=1e-5, rtol=1e-5)
