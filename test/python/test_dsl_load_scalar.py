"""tl.load_scalar (tile.load_scalar): one element of a descriptor as a scalar, the padding where
an index is out of range; its errors at the user's line. On the CPU interpreter."""
import numpy as np
import pytest

from dsl_helpers import assert_located
import tessel
from tessel import language as tl


@tessel.jit
def lookups(table, idx, out, n_rows, n_cols, PAD: tl.constexpr):
    """out[i] = table[idx[2i], idx[2i + 1]] (a [n_rows, n_cols] view), PAD out of range."""
    td = tl.make_desc(table, shape=(n_rows, n_cols), strides=(n_cols, 1))
    idd = tl.make_desc(idx, shape=(8,), strides=(1,))
    od = tl.make_desc(out, shape=(4,), strides=(1,))
    for i in range(0, 4, 1):
        r = tl.load_scalar(idd, (2 * i,))
        c = tl.load_scalar(idd, (2 * i + 1,))
        v = tl.load_scalar(td, (r, c), padding=PAD)
        tl.store(od, (i,), tl.full((1,), v, tl.int32))


def test_indices_from_memory_and_padding_out_of_range():
    table = np.arange(12, dtype=np.int32).reshape(3, 4) * 10
    idx = np.array([2, 3, 0, 0, -1, 0, 1, 4], dtype=np.int32)
    out = np.zeros(4, dtype=np.int32)
    lookups[(1,)](table, idx, out, 3, 4, PAD=-9)
    assert out.tolist() == [110, 0, -9, -9]
    # The view is 2x4 now: row 2 is out of range although the buffer holds it.
    lookups[(1,)](table, idx, out, 2, 4, PAD=5)
    assert out.tolist() == [5, 0, 5, 5]


@tessel.jit
def scaled(x, out, n, i):
    xd = tl.make_desc(x, shape=(n,), strides=(1,))
    od = tl.make_desc(out, shape=(n,), strides=(1,))
    s = tl.load_scalar(xd, (i,), padding=-1.5)        # a float scalar: f32 arithmetic
    tl.store(od, (0,), tl.load(xd, (0,), shape=(4,)) * s)


def test_float_scalar_scales_a_tile():
    x = np.array([1, 2, 3, 4], dtype=np.float32)
    out = np.zeros(4, dtype=np.float32)
    scaled[(1,)](x, out, 4, 2)
    assert out.tolist() == [3, 6, 9, 12]
    scaled[(1,)](x, out, 4, 4)
    assert out.tolist() == [-1.5, -3, -4.5, -6]


@tessel.jit
def pick(x, out, n, i):
    xd = tl.make_desc(x, shape=(n,), strides=(1,))
    od = tl.make_desc(out, shape=(1,), strides=(1,))
    s = tl.load_scalar(xd, (i,), padding=-2)
    tl.store(od, (0,), tl.full((1,), s.to(tl.float32), tl.float32))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bf16", "int32"])
def test_every_descriptor_dtype(dtype):
    # The dtype matrix of test_dsl_builtins.py, for the one builtin that reads memory as a scalar.
    values = np.array([1.5, -3.25, 7.0, 0.5], np.float32)
    if dtype == "int32":
        values = values.astype(np.int32)
    x = tessel.to_bf16(values) if dtype == "bf16" else values.astype(dtype)
    out = np.zeros(1, np.float32)
    for i, want in [(0, values[0]), (2, values[2]), (3, values[3]), (4, -2), (-1, -2)]:
        pick[(1,)](x, out, 4, i)
        assert out[0] == np.float32(want), (dtype, i)


@tessel.jit
def bad_rank(x, n):
    xd = tl.make_desc(x, shape=(n, n), strides=(n, 1))
    tl.load_scalar(xd, (0,))  # L1


@tessel.jit
def bad_padding(x, n):
    xd = tl.make_desc(x, shape=(n,), strides=(1,))
    tl.load_scalar(xd, (0,), padding=0.5)  # L2


@tessel.jit
def not_a_desc(x, n):
    tl.load_scalar(x, (0,))  # L3


@tessel.jit
def float_index(x, n):
    xd = tl.make_desc(x, shape=(n,), strides=(1,))
    tl.load_scalar(xd, (1.5,))  # L4


@pytest.mark.parametrize("kernel,tag,message", [
    (bad_rank, "L1", "tl.load_scalar: a rank-2 descriptor needs 2 offsets, got 1"),
    (bad_padding, "L2", "tl.load_scalar: padding 0.5 is not an i32 value"),
    (not_a_desc, "L3", "tl.load_scalar needs a descriptor from tl.make_desc"),
    (float_index, "L4", "tl.load_scalar offsets"),
])
def test_errors_are_located(kernel, tag, message):
    x = np.zeros(4, dtype=np.int32)
    with pytest.raises(tessel.CompilationError) as info:
        kernel[(1,)](x, 4)
    assert_located(info.value, __file__, tag, "tl.load_scalar", message)
