"""Every documented builtin x every documented dtype on the GPU, on both lowerings a chip has
(the reference lowering and codegen=auto), against the same float64 references as the
interpreter test (test/python/builtin_cases.py; issue 14, item 3).

Run on a machine with a GPU and torch (skipped elsewhere):
    PYTHONPATH=build/python python3 -m pytest -q test/gpu/test_builtins_gpu.py
"""
import pathlib
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
import builtin_cases as bc  # noqa: E402
import tessel  # noqa: E402
import tessel.cache  # noqa: E402
from tessel import gpu  # noqa: E402


def launcher(codegen):
    def launch(kernel, *args, **constexprs):
        dev = [torch.from_numpy(np.ascontiguousarray(a)).cuda() for a in args]
        compiled = kernel.warmup(*dev, **constexprs)
        options = tessel.cache.GpuOptions(chip=gpu.chip_of(0), codegen=codegen)
        compiled.gpu_launcher(0, options).launch((1, 1, 1), gpu.stream_source(), *dev)
        torch.cuda.synchronize()
        args[-1][...] = dev[-1].cpu().numpy()
    return launch


@pytest.mark.parametrize("codegen", ["reference", "auto"])
@pytest.mark.parametrize("kind,case,dtype", bc.all_cases())
def test_builtin_on_dtype_gpu(kind, case, dtype, codegen):
    if (case, dtype) in bc.EXPECTED_ERRORS:
        pytest.skip("a compile-time error, checked on the interpreter")
    rng = np.random.default_rng(abs(hash((kind, case, dtype))) % 2**32)
    a, b = bc.inputs(case, dtype, rng)
    out = np.full(bc.N, np.nan, np.float32)
    bc.run_case(kind, case, dtype, a, b, out, launcher(codegen))
    ref = bc.reference(kind, case, dtype, a, b)
    # The GPU's exp/log/tanh are approximations: a few ulp of f32.
    tol = max(bc.tolerance(dtype), 1e-5)
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol,
                               err_msg=f"{kind} {case} on {dtype} ({codegen})")
