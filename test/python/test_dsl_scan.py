"""tl.cumsum, tl.cummax, tl.cummin (tile.scan): longer scans on the interpreter, the located
refusals, and the kernels the GPU lowerings make of them. The 4x4 cases of every dtype are in
the builtin matrix (builtin_cases.py); the GPU runs both in test/gpu/test_builtins_gpu.py."""
import numpy as np
import pytest

import dsl_helpers  # (also puts the built package on sys.path)
import builtin_cases as bc
import tessel
from tessel import _tessel, cache
from tessel import language as tl

needs_interpreter = pytest.mark.skipif(not _tessel.has_interpreter,
                                       reason="this build has no interpreter")


@needs_interpreter
def test_scans_of_a_length_map():
    rng = np.random.default_rng(5)
    (lens, x), out, want = bc.scan_inputs(rng)
    bc.scan_kernel[(1,)](lens, *out[:2], x, out[2], N=lens.size, M=x.shape[0])
    np.testing.assert_array_equal(out[0], want[0])
    np.testing.assert_array_equal(out[1], want[1])
    np.testing.assert_allclose(out[2], want[2], rtol=4e-3, atol=4e-3)


@tessel.jit
def running(x, y, N: tl.constexpr, OP: tl.constexpr):
    t = tl.load(tl.make_desc(x, shape=(N,), strides=(1,)), (0,), shape=(N,))
    r = tl.cummax(t) if OP == "max" else tl.cummin(t, reverse=True)
    tl.store(tl.make_desc(y, shape=(N,), strides=(1,)), (0,), r)


@needs_interpreter
@pytest.mark.parametrize("op", ["max", "min"])
def test_running_extremes_propagate_nan_and_inf(op):
    x = np.array([1.0, -np.inf, 3.0, np.nan, 2.0, np.inf, -5.0, 0.0], np.float32)
    y = np.zeros_like(x)
    running[(1,)](x, y, N=x.size, OP=op)
    if op == "max":
        want = [1.0, 1.0, 3.0, np.nan, np.nan, np.nan, np.nan, np.nan]
    else:
        want = [np.nan, np.nan, np.nan, np.nan, -5.0, -5.0, -5.0, 0.0]
    np.testing.assert_array_equal(y, np.array(want, np.float32))


@tessel.jit
def bad_scan(x, y, CASE: tl.constexpr):
    t = tl.load(tl.make_desc(x, shape=(8,), strides=(1,)), (0,), shape=(8,))
    if CASE == "axis":
        r = tl.cumsum(t, axis=1)  # axis
    elif CASE == "reverse":
        r = tl.cumsum(t, reverse=t > 0)  # reverse
    elif CASE == "scalar":
        r = tl.cumsum(3)  # scalar
    else:
        r = tl.cummax(t.to(tl.float8_e4m3fn)).to(tl.float32)  # fp8
    tl.store(tl.make_desc(y, shape=(8,), strides=(1,)), (0,), r)


@pytest.mark.parametrize("case,token,message", [
    ("axis", "tl.cumsum", "axis 1 is out of range for a rank-1 tile"),
    ("reverse", "tl.cumsum", "tl.cumsum: reverse must be a compile-time bool, not i1 tile"),
    ("scalar", "tl.cumsum", "tl.cumsum's operand must be a tile"),
    ("fp8", "tl.cummax", "tl.cummax of an FP8 tile: convert it with .to"),
])
def test_refusals_are_located(case, token, message):
    x = np.zeros(8, np.float32)
    with pytest.raises(tessel.CompilationError) as e:
        bad_scan.warmup(x, x, CASE=case)
    dsl_helpers.assert_located(e.value, __file__, case, token, message)


@dsl_helpers.needs_ptxas()
@pytest.mark.parametrize("chip", ["sm_80", "sm_90a"])
def test_scans_compile_for_the_gpu(tmp_path, chip):
    # codegen auto: the blocked and fast lowerings refuse tile.scan, the reference lowering
    # takes it (one thread a line); no spill.
    (lens, x), out, _ = bc.scan_inputs(np.random.default_rng(0))
    k = bc.scan_kernel.warmup(lens, *out[:2], x, out[2], N=lens.size, M=x.shape[0])
    b = cache.get_binary(k, cache.GpuOptions(chip=chip), directory=str(tmp_path))
    assert b.manifest["spill_bytes"] == 0
    assert "add.rn.f32" in b.ptx or "add.f32" in b.ptx


@tessel.jit
def scan3(x, y, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr, AX: tl.constexpr,
          REV: tl.constexpr, OP: tl.constexpr, DT: tl.constexpr):
    d = tl.make_desc(x, shape=(A, B, C), strides=(B * C, C, 1))
    t = tl.load(d, (0, 0, 0), shape=(A, B, C)).to(DT)
    if OP == "sum":
        r = tl.cumsum(t, AX, reverse=REV)
    elif OP == "max":
        r = tl.cummax(t, AX, reverse=REV)
    else:
        r = tl.cummin(t, AX, reverse=REV)
    tl.store(tl.make_desc(y, shape=(A, B, C), strides=(B * C, C, 1)), (0, 0, 0),
             r.to(tl.float32))


@needs_interpreter
@pytest.mark.parametrize("seed", range(12))
def test_random_scans_of_rank_three(seed):
    # Any axis of a 3-D tile, either direction, each kind and dtype, against numpy: integers
    # exactly, floats carried in float32 and rounded to the dtype at each element.
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.choice([1, 2, 3, 4, 8], 3))
    ax, rev = int(rng.integers(-3, 3)), bool(rng.integers(2))
    op, dt = rng.choice(["sum", "max", "min"]), rng.choice(["i32", "f32", "f16"])
    x = rng.integers(-20, 20, shape).astype(np.float32)
    if dt != "i32":
        x += rng.uniform(-1, 1, shape).astype(np.float32)
    y = np.zeros_like(x)
    scan3[(1,)](x, y, A=shape[0], B=shape[1], C=shape[2], AX=ax, REV=rev, OP=op,
                DT=bc.DTYPES[dt])
    xr = bc._round(x, dt).astype(np.float32)
    f = {"sum": np.cumsum, "max": np.maximum.accumulate, "min": np.minimum.accumulate}[op]
    v = np.flip(xr, ax) if rev else xr
    want = f(v, axis=ax)
    want = np.flip(want, ax) if rev else want
    np.testing.assert_allclose(y, bc._round(want, "f16" if dt == "f16" else "f32"),
                               rtol=1e-6, atol=1e-6, err_msg=f"{op} {dt} axis {ax} rev {rev}")
