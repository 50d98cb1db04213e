"""Every documented builtin x every documented dtype on the interpreter (issue 14, item 3): the
result of the float64 reference, or a CompilationError the docs announce — never a failure at
run time (`tl.abs` of an i32 tile used to fail there: the interpreter has no math.absi)."""
import numpy as np
import pytest

import dsl_helpers  # noqa: F401  (puts the built package on sys.path)
import builtin_cases as bc
import tessel
from tessel import _tessel

pytestmark = pytest.mark.skipif(not _tessel.has_interpreter,
                                reason="this build has no interpreter (branch interp not merged)")


def launch(kernel, *args, **constexprs):
    kernel[(1,)](*args, **constexprs)


@pytest.mark.parametrize("kind,case,dtype", bc.all_cases())
def test_builtin_on_dtype(kind, case, dtype):
    rng = np.random.default_rng(abs(hash((kind, case, dtype))) % 2**32)
    a, b = bc.inputs(case, dtype, rng)
    out = np.full(bc.N, np.nan, np.float32)
    expected_error = bc.EXPECTED_ERRORS.get((case, dtype))
    if expected_error:
        with pytest.raises(tessel.CompilationError, match=expected_error):
            bc.run_case(kind, case, dtype, a, b, out, launch)
        return
    bc.run_case(kind, case, dtype, a, b, out, launch)
    ref = bc.reference(kind, case, dtype, a, b)
    np.testing.assert_allclose(out, ref, rtol=bc.tolerance(dtype), atol=bc.tolerance(dtype),
                               err_msg=f"{kind} {case} on {dtype}")


def test_the_matrix_covers_every_documented_builtin():
    from tessel import language as tl
    covered = set(bc.UNARY) | {"maximum", "minimum", "where", "cdiv", "umulhi"} | set(bc.REDUCE) | \
        set(bc.SCAN) | set(bc.MATRIX) | {"cast", "program_id", "num_programs", "make_desc",
                                         "load", "store", "zeros", "full", "arange", "stream",
                                         "static_range"}
    # Not an element-wise builtin but a compile-time derivative: test_attention_backward.py and
    # test/Transforms/elementwise-grad*.mlir check it on every op it differentiates or refuses.
    covered |= {"elementwise_grad"}
    # A scalar read from memory: test_dsl_load_scalar.py runs it on every descriptor dtype.
    covered |= {"load_scalar"}
    # Random numbers: test_dsl_random.py checks them against Philox's published vectors and a
    # numpy Philox; they take an int32 counter tile only.
    covered |= {"randint4x", "randint", "rand", "randn"}
    # Adds into memory: test_dsl_atomic_add.py runs it on f32 and i32, the dtypes it takes, and
    # checks the located refusal of f16 and bf16.
    covered |= {"atomic_add"}
    assert set(tl.BUILTINS) <= covered, set(tl.BUILTINS) - covered
