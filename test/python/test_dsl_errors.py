"""Bad kernels give a CompilationError naming the user's file, line and column, with a caret."""
import numpy as np
import pytest

from dsl_helpers import marked
import tessel
from tessel import language as tl

F32 = np.zeros(64, dtype=np.float32)


def compile_error(kernel, *args, **kwargs):
    with pytest.raises(tessel.CompilationError) as info:
        kernel.warmup(*args, **kwargs)
    return info.value


def check(err, tag, token, message):
    line, col = marked(__file__, tag, token)
    assert err.filename == __file__
    assert (err.lineno, err.col) == (line, col), str(err)
    assert message in err.message, err.message
    text = str(err)
    assert text.startswith(f"{__file__}:{line}:{col}: error: ")
    lines = text.splitlines()
    assert lines[-1] == " " * (col - 1) + "^"
    assert token in lines[-2]


@tessel.jit
def k_while(x):
    i = 0
    while i < 3:  # E1
        i += 1


def test_while_is_rejected():
    check(compile_error(k_while, F32), "E1", "while", "while loops are not supported")


@tessel.jit
def k_lambda(x):
    f = lambda a: a  # E2


def test_lambda_is_rejected():
    check(compile_error(k_lambda, F32), "E2", "lambda", "lambda is not supported")


@tessel.jit
def k_comprehension(x):
    y = [i for i in range(3)]  # E3


def test_comprehension_is_rejected():
    check(compile_error(k_comprehension, F32), "E3", "[i for", "comprehensions are not supported")


@tessel.jit
def k_try(x):
    try:  # E4
        pass
    except Exception:
        pass


def test_try_is_rejected():
    check(compile_error(k_try, F32), "E4", "try", "try/except is not supported")


@tessel.jit
def k_unknown_tl(x):
    y = tl.softmaxx(1)  # E5


def test_unknown_tl_function():
    check(compile_error(k_unknown_tl, F32), "E5", "tl.softmaxx", "has no attribute 'softmaxx'")


@tessel.jit
def k_arg_count(x):
    p = tl.program_id(0, 1)  # E6


def test_wrong_argument_count():
    check(compile_error(k_arg_count, F32), "E6", "tl.program_id(0, 1)",
          "tl.program_id(): too many positional arguments")


@tessel.jit
def k_load_no_shape(x, n):
    d = tl.make_desc(x, shape=(n,), strides=(1,))
    t = tl.load(d, (0,))  # E7


def test_load_without_shape():
    check(compile_error(k_load_no_shape, F32, 64), "E7", "tl.load(d", "tl.load needs the tile shape")


@tessel.jit
def k_dot_mismatch(x, n):
    d = tl.make_desc(x, shape=(n, 8), strides=(8, 1))
    a = tl.load(d, (0, 0), shape=(16, 8))
    c = tl.dot(a, a)  # E8


def test_dot_shape_mismatch():
    check(compile_error(k_dot_mismatch, F32, 8), "E8", "tl.dot(a, a)",
          "shapes (16, 8) and (16, 8) do not contract")


@tessel.jit
def k_not_constexpr(x, n):
    z = tl.zeros((n, 4))  # E9


def test_runtime_value_where_constexpr_needed():
    check(compile_error(k_not_constexpr, F32, 4), "E9", "tl.zeros",
          "must be a compile-time constant (tl.constexpr)")


@tessel.jit
def k_undefined(x):
    y = undefined_name + 1  # E10


def test_undefined_name():
    check(compile_error(k_undefined, F32), "E10", "undefined_name", "name 'undefined_name' is not defined")


@tessel.jit
def k_broadcast(x):
    a = tl.zeros((4, 8))
    b = tl.zeros((4, 3))
    c = a + b  # E11


def test_shapes_that_do_not_broadcast():
    check(compile_error(k_broadcast, F32), "E11", "a + b", "cannot be broadcast together")


@tessel.jit
def k_loop_type_change(x, n):
    acc = 0.0
    for i in range(n):  # E12
        acc = tl.zeros((4, 4))


def test_loop_carried_type_change():
    check(compile_error(k_loop_type_change, F32, 4), "E12", "for",
          "'acc' is carried by the loop as a f32 scalar but the body makes it a f32 tile")


@tessel.jit
def k_store_dtype(x, n):
    d = tl.make_desc(x, shape=(n,), strides=(1,))
    tl.store(d, (0,), tl.zeros((16,), tl.int32))  # E13


def test_store_dtype_mismatch():
    check(compile_error(k_store_dtype, F32, 4), "E13", "tl.store",
          "a i32 tile into a f32 descriptor")


@tessel.jit
def k_plain_python_call(x):
    y = np.hypot(1.0, 2.0)  # E14


def test_call_of_non_jit_function():
    # A library function (here a numpy ufunc) is not inlined: only the user's own plain
    # functions are (test_dsl_plain_calls.py).
    check(compile_error(k_plain_python_call, F32), "E14", "np.hypot(1.0, 2.0)",
          "'hypot' is not a tl function or a @tessel.jit function")


@tessel.jit
def k_tile_if(x):
    t = tl.zeros((4, 4))
    if t > 0:  # E15
        pass


def test_if_on_a_tile():
    check(compile_error(k_tile_if, F32), "E15", "t > 0", "an if condition must be a scalar")


@tessel.jit
def k_scoped(x, n):
    for i in range(n):
        inner = i * 2
    y = inner + 1  # E16


def test_loop_local_used_after_loop():
    check(compile_error(k_scoped, F32, 4), "E16", "inner + 1",
          "'inner' is defined only inside the loop")


@tessel.jit
def k_streamed_outside(x):
    p = tl.softmax(tl.zeros((4, 4)), axis=1, streamed=True)  # E17


def test_streamed_softmax_outside_stream_loop():
    check(compile_error(k_streamed_outside, F32), "E17", "tl.softmax",
          "must sit directly in the body of a `for ... in tl.stream(...)` loop")


@tessel.jit
def callee(a, N: tl.constexpr):
    return tl.zeros((N, N))


@tessel.jit
def k_callee_constexpr(x, n):
    z = callee(x, n)  # E18


def test_callee_constexpr_gets_runtime_value():
    check(compile_error(k_callee_constexpr, F32, 4), "E18", "callee(x, n)",
          "parameter 'N' is tl.constexpr but receives a run-time value")


@tessel.jit
def k_reduce_1d(x):
    s = tl.sum(tl.zeros((8,)), 0)  # E19


def test_reduce_to_scalar():
    check(compile_error(k_reduce_1d, F32), "E19", "tl.sum", "would give a scalar")


@tessel.jit
def k_return_value(x):
    return 1  # E20


def test_kernel_returns_value():
    check(compile_error(k_return_value, F32), "E20", "return", "a kernel cannot return a value")


@tessel.jit
def k_item_assign(x):
    t = tl.zeros((4,))
    t[0] = 1.0  # E21


def test_item_assignment():
    check(compile_error(k_item_assign, F32), "E21", "t[0]", "tiles are immutable")


@tessel.jit
def k_bad_index(x):
    t = tl.zeros((4, 4))
    u = t[0, :]  # E22


def test_integer_index_of_tile():
    check(compile_error(k_bad_index, F32), "E22", "0, :", "tiles can only be indexed with ':' and None")


@tessel.jit
def k_dot_dtypes(x):
    a = tl.zeros((4, 4), tl.float16)
    b = tl.zeros((4, 4), tl.float32)
    c = tl.dot(a, b)  # E23


def test_dot_operand_types_differ():
    check(compile_error(k_dot_dtypes, F32), "E23", "tl.dot", "operands differ in type: f16 and f32")


@tessel.jit
def k_unpack(x):
    a, b = tl.zeros((4,)), tl.zeros((4,)), 1  # E24


def test_tuple_unpacking_count():
    check(compile_error(k_unpack, F32), "E24", "a, b", "cannot unpack 3 values into 2 names")


@tessel.jit
def k_verifier(x, n):
    d = tl.make_desc(x, shape=(n,), strides=(1,))
    tl.store(d, (0,), tl.zeros((4, 4)))  # E25


def test_rank_mismatch_of_store():
    check(compile_error(k_verifier, F32, 4), "E25", "tl.store", "into a rank-1 descriptor")


def test_error_is_an_exception_not_a_crash_for_bad_grid():
    @tessel.jit
    def ok(x):
        pass
    with pytest.raises(TypeError):
        ok[(1,)]("not an array")


@tessel.jit
def k_fill(out, v):
    d = tl.make_desc(out, shape=(4,), strides=(1,))
    tl.store(d, (tl.program_id(0) * 2,), tl.full((2,), v, tl.float32))


@pytest.mark.parametrize("grid,error,match", [
    ((1.5,), TypeError, "a grid is an int or a tuple of 1 to 3 ints"),
    (2.0, TypeError, "a grid is an int or a tuple of 1 to 3 ints"),
    ((1, 1, 1, 1), ValueError, "a grid has 1 to 3 sizes"),
    ((-1,), ValueError, "between 0 and 2"),
    ((2**31,), ValueError, "between 0 and 2")])
def test_interpreter_grids_are_checked_as_the_gpu_launcher_checks_them(grid, error, match):
    # A float grid size was truncated (1.5 ran one program and left the rest unwritten).
    out = np.zeros(4, np.float32)
    with pytest.raises(error, match=match):
        k_fill[grid](out, 1.0)
    assert not out.any()


def test_an_empty_grid_launches_nothing():
    # As the CUDA launcher and Triton do: a zero size is an empty launch, not an error.
    out = np.zeros(4, np.float32)
    k_fill[(0,)](out, 1.0)
    k_fill[(2, 0)](out, 1.0)
    assert not out.any()
    k_fill[(np.int64(2),)](out, 3.0)
    assert (out == 3.0).all()


def test_kernel_called_directly():
    with pytest.raises(RuntimeError, match="launch it with"):
        k_while(F32)


@tessel.jit
def k_carried_softmax(x, n):
    s = tl.zeros((4, 4))
    acc = tl.zeros((4, 4))
    for j in tl.stream(0, n, 4):
        s = s + 1.0
        p = tl.softmax(s, axis=1)  # E26
        acc += tl.dot(p, tl.zeros((4, 4)))


def test_mlir_verifier_error_is_located():
    # The front end lets this through; the tile.softmax verifier refuses it, and the MLIR
    # diagnostic comes back at the user's line.
    check(compile_error(k_carried_softmax, F32, 8), "E26", "tl.softmax", "'tile.softmax' op")


def _kernel_from_source(tmp_path, expression):
    """A kernel `deep(x, y)` storing `expression` (of the tile `t`), from a file of its own."""
    import importlib.util
    path = tmp_path / "deep_kernel.py"
    path.write_text("import tessel\nfrom tessel import language as tl\n\n\n@tessel.jit\n"
                    "def deep(x, y):\n"
                    "    d = tl.make_desc(x, shape=(64,), strides=(1,))\n"
                    "    e = tl.make_desc(y, shape=(64,), strides=(1,))\n"
                    "    t = tl.load(d, (0,), shape=(64,))\n"
                    f"    r = {expression}\n"
                    "    tl.store(e, (0,), r)\n")
    spec = importlib.util.spec_from_file_location(f"deep_{abs(hash(expression))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.deep, path


def test_long_expression_traces_without_recursion(tmp_path):
    # Issue 15, finding 7: a sum of 600 terms raised RecursionError from frontend.py; chains of
    # binary operators are walked iteratively, whatever their length.
    deep, _ = _kernel_from_source(tmp_path, " + ".join(["t"] * 600))
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(64, np.float32)
    deep[(1,)](x, y)
    assert np.array_equal(y, 600 * x)


def test_deeply_nested_expression_is_a_located_error(tmp_path):
    # Nesting that is not a chain (here 900 unary minus signs: a RecursionError before) is refused
    # past a documented depth with a located error.
    deep, path = _kernel_from_source(tmp_path, "- " * 900 + "t")
    with pytest.raises(tessel.CompilationError) as info:
        deep.warmup(F32, F32)
    err = info.value
    assert err.filename == str(path) and err.lineno == 10
    assert "expression nested more than 200 levels deep" in err.message
