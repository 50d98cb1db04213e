"""Every documented builtin of the tile language on every documented dtype (issue 14, item 3):
the kernels and their numpy references, shared by the interpreter test
(test/python/test_dsl_builtins.py) and the GPU test (test/gpu/test_builtins_gpu.py).

A case loads float32 data, converts it to the dtype under test, applies the builtin, converts
the result back to float32 and stores it. Each (builtin, dtype) either computes the reference
or is one of the documented refusals (EXPECTED_ERRORS), which must be a CompilationError at
compile time, never a failure at run time.
"""
import numpy as np

import tessel
from tessel import language as tl

DTYPES = {"f16": tl.float16, "bf16": tl.bfloat16, "f32": tl.float32, "i32": tl.int32,
          "i1": tl.int1}
FLOATS = ("f16", "bf16", "f32")
N = 16          # 1-D cases: 16 elements; 2-D cases: 4 x 4
UNARY = ("exp", "exp2", "log", "log2", "sqrt", "tanh", "sin", "cos", "abs")
BINARY = ("maximum", "minimum", "where", "add", "sub", "mul", "floordiv", "mod", "truediv",
          "cdiv", "umulhi")
REDUCE = ("sum", "max", "min")
SCAN = ("cumsum", "cummax", "cummin")
MATRIX = ("dot", "softmax", "trans", "expand_dims", "broadcast_to")

# (builtin, dtype) pairs the docs refuse, with a piece of the message.
EXPECTED_ERRORS = {
    **{("dot", d): "tl.dot multiplies f8e4m3fn, f16, bf16 or f32 tiles" for d in ("i32", "i1")},
    **{("softmax", d): "tl.softmax needs a float tile" for d in ("i32", "i1")},
    **{("floordiv", d): "'//' on floats is not supported" for d in FLOATS},
    **{("mod", d): "'%' on floats is not supported" for d in FLOATS},
    **{("cdiv", d): "'//' on floats" for d in FLOATS},
    **{("umulhi", d): "tl.umulhi takes int32 operands" for d in FLOATS},
}


@tessel.jit
def unary_kernel(x, y, FN: tl.constexpr, DT: tl.constexpr):
    d = tl.make_desc(x, shape=(16,), strides=(1,))
    e = tl.make_desc(y, shape=(16,), strides=(1,))
    t = tl.load(d, (0,), shape=(16,)).to(DT)
    tl.store(e, (0,), FN(t).to(tl.float32))


@tessel.jit
def binary_kernel(x, z, y, OP: tl.constexpr, DT: tl.constexpr):
    d = tl.make_desc(x, shape=(16,), strides=(1,))
    f = tl.make_desc(z, shape=(16,), strides=(1,))
    e = tl.make_desc(y, shape=(16,), strides=(1,))
    a = tl.load(d, (0,), shape=(16,)).to(DT)
    b = tl.load(f, (0,), shape=(16,)).to(DT)
    if OP == "maximum":
        r = tl.maximum(a, b)
    elif OP == "minimum":
        r = tl.minimum(a, b)
    elif OP == "where":
        r = tl.where(a > b, a, b)
    elif OP == "add":
        r = a + b
    elif OP == "sub":
        r = a - b
    elif OP == "mul":
        r = a * b
    elif OP == "floordiv":
        r = a // b
    elif OP == "mod":
        r = a % b
    elif OP == "truediv":
        r = a / b
    elif OP == "umulhi":
        r = tl.umulhi(a * 123457, b * -70001)   # products past 2^32, negative bits
    else:
        r = tl.cdiv(a, b)
    tl.store(e, (0,), r.to(tl.float32))


@tessel.jit
def matrix_kernel(x, z, y, OP: tl.constexpr, DT: tl.constexpr):
    d = tl.make_desc(x, shape=(4, 4), strides=(4, 1))
    f = tl.make_desc(z, shape=(4, 4), strides=(4, 1))
    e = tl.make_desc(y, shape=(4, 4), strides=(4, 1))
    a = tl.load(d, (0, 0), shape=(4, 4)).to(DT)
    b = tl.load(f, (0, 0), shape=(4, 4)).to(DT)
    if OP == "sum":
        r = tl.broadcast_to(tl.sum(a, axis=1)[:, None], (4, 4))
    elif OP == "max":
        r = tl.broadcast_to(tl.max(a, axis=0)[None, :], (4, 4))
    elif OP == "min":
        r = tl.broadcast_to(tl.min(a, axis=1)[:, None], (4, 4))
    elif OP == "cumsum":
        r = tl.cumsum(a, axis=1)
    elif OP == "cummax":
        r = tl.cummax(a, axis=0)
    elif OP == "cummin":
        r = tl.cummin(a, axis=-1, reverse=True)
    elif OP == "dot":
        r = tl.dot(a, b)
    elif OP == "softmax":
        r = tl.softmax(a, axis=1)
    elif OP == "trans":
        r = tl.trans(a)
    elif OP == "expand_dims":
        r = tl.broadcast_to(tl.expand_dims(tl.max(a, axis=1), 1), (4, 4))
    else:
        r = a + tl.broadcast_to(tl.zeros((1, 4), DT), (4, 4))
    tl.store(e, (0, 0), r.to(tl.float32))


@tessel.jit
def cast_kernel(x, y, FROM: tl.constexpr, TO: tl.constexpr):
    d = tl.make_desc(x, shape=(16,), strides=(1,))
    e = tl.make_desc(y, shape=(16,), strides=(1,))
    t = tl.load(d, (0,), shape=(16,)).to(FROM)
    tl.store(e, (0,), tl.cast(t, TO).to(tl.float32))


def _round(v, dtype):
    """float64 values as the dtype holds them (the kernel's `.to(dtype)` of float32 data)."""
    v = np.asarray(v, dtype=np.float32)
    if dtype == "f16":
        return v.astype(np.float16).astype(np.float64)
    if dtype == "bf16":
        bits = v.view(np.uint32).astype(np.uint64)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16   # round to nearest even
        return bits.astype(np.uint32).view(np.float32).astype(np.float64)
    if dtype == "i32":
        return np.trunc(v).astype(np.float64)
    if dtype == "i1":
        return (v != 0).astype(np.float64)
    return v.astype(np.float64)


def inputs(case, dtype, rng):
    """Data for a case: values where the builtin is defined and the integer cases are exact."""
    if case in ("log", "log2", "sqrt"):
        a = rng.uniform(0.25, 4.0, N)
    elif dtype in ("i32", "i1") or case in ("floordiv", "mod", "cdiv"):
        a = rng.integers(-9, 10, N).astype(np.float64)
    else:
        a = rng.uniform(-3.0, 3.0, N)
    b = rng.choice([-3.0, -2.0, -1.0, 1.0, 2.0, 5.0], N) if dtype != "i1" else \
        rng.integers(0, 2, N).astype(np.float64)
    if case in ("floordiv", "mod", "cdiv", "truediv") and dtype == "i1":
        b = np.ones(N)     # booleans divide by True only
    return a.astype(np.float32), b.astype(np.float32)


def _out(v, dtype):
    """A result of `dtype` arithmetic as the kernel stores it: rounded to the dtype (an i1
    result of arithmetic is i32, floats of integer math are f32)."""
    return _round(v, dtype if dtype in FLOATS else "f32")


def reference(kind, case, dtype, a, b):
    x, y = _round(a, dtype), _round(b, dtype)
    if kind == "cast":
        return _round(x.astype(np.float32), case)
    if kind == "unary":
        if case == "abs":
            return _out(np.abs(x), dtype) if dtype != "i1" else x
        f = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
             "tanh": np.tanh, "sin": np.sin, "cos": np.cos}[case]
        with np.errstate(divide="ignore"):
            return _out(f(x), dtype if dtype in FLOATS else "f32")
    if kind == "binary":
        with np.errstate(all="ignore"):
            return _binary_reference(case, dtype, x, y)
    return _matrix_reference(case, dtype, x, y)


def _binary_reference(case, dtype, x, y):
    if case == "where":
        return np.where(x > y, x, y)
    if case in ("maximum", "minimum"):
        return np.maximum(x, y) if case == "maximum" else np.minimum(x, y)
    if case == "truediv":
        return _out(x / y, dtype if dtype in FLOATS else "f32")
    if case == "umulhi":
        u = (x.astype(np.int64) * 123457).astype(np.uint32).astype(np.uint64)
        v = (y.astype(np.int64) * -70001).astype(np.uint32).astype(np.uint64)
        return ((u * v) >> np.uint64(32)).astype(np.uint32).view(np.int32).astype(np.float64)
    r = {"add": x + y, "sub": x - y, "mul": x * y, "floordiv": x // y, "mod": np.mod(x, y),
         "cdiv": -(-x // y)}[case]
    return _out(r, dtype)


def _matrix_reference(case, dtype, x, y):
    x, y = x.reshape(4, 4), y.reshape(4, 4)
    if case == "sum":
        return np.broadcast_to(_out(x.sum(axis=1), dtype)[:, None], (4, 4)).ravel()
    if case == "max":
        return np.broadcast_to(x.max(axis=0)[None, :], (4, 4)).ravel()
    if case in ("min", "expand_dims"):
        f = np.min if case == "min" else np.max
        return np.broadcast_to(f(x, axis=1)[:, None], (4, 4)).ravel()
    if case == "cumsum":     # float32 running sums, each rounded to the dtype
        return _out(np.cumsum(x.astype(np.float32), axis=1), dtype).ravel()
    if case == "cummax":
        return np.maximum.accumulate(x, axis=0).ravel()
    if case == "cummin":
        return np.flip(np.minimum.accumulate(np.flip(x, 1), axis=1), 1).ravel()
    if case == "dot":
        return (x @ y).ravel()
    if case == "softmax":
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return _out(e / e.sum(axis=1, keepdims=True), dtype).ravel()
    if case == "trans":
        return x.T.ravel()
    return _out(x, dtype).ravel()


def tolerance(dtype):
    return {"f16": 2e-3, "bf16": 1.6e-2}.get(dtype, 2e-6)


def all_cases():
    """(kind, case, dtype) of the matrix."""
    out = [("unary", c, d) for c in UNARY for d in DTYPES]
    out += [("binary", c, d) for c in BINARY for d in DTYPES]
    out += [("matrix", c, d) for c in REDUCE + SCAN + MATRIX for d in DTYPES]
    out += [("cast", to, d) for to in DTYPES for d in DTYPES]
    return out


def run_case(kind, case, dtype, a, b, out, launch):
    """Launches one case through `launch(kernel, *args, **constexprs)`; out receives 16 floats."""
    if kind == "unary":
        launch(unary_kernel, a, out, FN=getattr(tl, case), DT=DTYPES[dtype])
    elif kind == "binary":
        launch(binary_kernel, a, b, out, OP=case, DT=DTYPES[dtype])
    elif kind == "cast":
        launch(cast_kernel, a, out, FROM=DTYPES[dtype], TO=DTYPES[case])
    else:
        launch(matrix_kernel, a, b, out, OP=case, DT=DTYPES[dtype])


# ---- scans longer than a row of threads: what a map of sequence starts needs -----------------

@tessel.jit
def scan_kernel(lens, starts, counts, x, y, N: tl.constexpr, M: tl.constexpr):
    """starts = exclusive prefix sums of N int32 lengths, counts = the running number of
    lengths > 4, and y = the reversed cumsum along the rows of an [M, N] f16 tile (f32 out)."""
    dl = tl.make_desc(lens, shape=(N,), strides=(1,))
    n = tl.load(dl, (0,), shape=(N,))
    tl.store(tl.make_desc(starts, shape=(N,), strides=(1,)), (0,), tl.cumsum(n) - n)
    tl.store(tl.make_desc(counts, shape=(N,), strides=(1,)), (0,), tl.cumsum(n > 4, axis=-1))
    t = tl.load(tl.make_desc(x, shape=(M, N), strides=(N, 1)), (0, 0), shape=(M, N))
    r = tl.cumsum(t.to(tl.float16), axis=1, reverse=True).to(tl.float32)
    tl.store(tl.make_desc(y, shape=(M, N), strides=(N, 1)), (0, 0), r)


def scan_inputs(rng, N=512, M=4):
    """scan_kernel's inputs, its output buffers and the references (f16 values rounded)."""
    lens = rng.integers(0, 9, N).astype(np.int32)
    x = rng.uniform(-1.0, 1.0, (M, N)).astype(np.float32)
    out = (np.zeros(N, np.int32), np.zeros(N, np.int32), np.zeros((M, N), np.float32))
    xr = _round(x, "f16")
    rev = np.flip(np.cumsum(np.flip(xr, 1).astype(np.float32), axis=1), 1)
    want = (np.cumsum(lens) - lens, np.cumsum(lens > 4), _round(rev, "f16"))
    return (lens, x), out, want
