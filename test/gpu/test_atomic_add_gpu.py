"""tl.atomic_add on the GPU: many programs adding into the same elements, on each lowering
(the blocked path of a program without dots, the reference lowering, and — through
test_tile_programs_gpu.py's atomic split-K GEMM — the tensor-core paths), against torch.

Run on a machine with a GPU and torch (skipped elsewhere):
    TESSEL_CACHE_DIR=$(mktemp -d) python3 -m pytest -q test/gpu/test_atomic_add_gpu.py
"""
import pathlib
import sys

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

from tessel import gpu as tgpu  # noqa: E402
from tessel.cache import GpuOptions  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
from atomic_kernels import histogram, overlapping  # noqa: E402


def launch(kernel, grid, codegen, *args, **constexprs):
    if codegen == "auto":
        kernel[grid](*args, **constexprs)
    else:
        device = args[0].get_device()
        options = GpuOptions(chip=tgpu.chip_of(device), codegen=codegen)
        kernel.warmup(*args, **constexprs).gpu_launcher(device, options).launch(
            grid, tgpu.stream_source(), *args)
    torch.cuda.synchronize()


@pytest.mark.parametrize("codegen", ["auto", "reference"])
def test_overlapping_adds(codegen):
    n, block = 3000, 16
    gen = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(n, 64, device="cuda", generator=gen)
    out = torch.ones(n, 64, device="cuda")
    launch(overlapping, (n,), codegen, x, out, n, W=64, BLOCK=block)
    times = torch.clamp(torch.arange(n, device="cuda") + 1, max=block)[:, None].double()
    ref = 1 + times * x.double()
    assert ((out.double() - ref).abs().max() / ref.abs().max()).item() < 1e-6


@pytest.mark.parametrize("codegen", ["auto", "reference"])
def test_int32_counts(codegen):
    gen = torch.Generator(device="cuda").manual_seed(2)
    keys = torch.randint(-3, 40, (5000,), device="cuda", generator=gen, dtype=torch.int32)
    out = torch.zeros(37, device="cuda", dtype=torch.int32)
    launch(histogram, (-(-5000 // 8),), codegen, keys, out, 5000, 37, BLOCK=8)
    kept = keys[(keys >= 0) & (keys < 37)].long()
    assert out.tolist() == torch.bincount(kept, minlength=37).tolist()
