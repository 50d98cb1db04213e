"""tl.atomic_add on the GPU: many programs adding into the same elements, on each lowering
(the blocked path of a program without dots, the reference lowering, and — through
test_tile_programs_gpu.py's atomic split-K GEMM — the tensor-core paths), against torch.

Run on a machine with a GPU and torch (skipped elsewhere):
    TESSEL_CACHE_DIR=$(mktemp -d) python3 -m pytest -q test/gpu/test_atomic_add_gpu.py
"""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tessel  # noqa: E402
from tessel import gpu as tgpu  # noqa: E402
from tessel import language as tl  # noqa: E402
from tessel.cache import GpuOptions  # noqa: E402


@tessel.jit
def overlapping(x, out, n, BLOCK: tl.constexpr):
    """Program p adds rows [p, p + BLOCK) of x [n, 64] into the same rows of out: each row gets
    up to BLOCK adds from different programs; the last programs run past n (dropped)."""
    p = tl.program_id(0)
    xd = tl.make_desc(x, shape=(n, 64), strides=(64, 1))
    od = tl.make_desc(out, shape=(n, 64), strides=(64, 1))
    tl.atomic_add(od, (p, 0), tl.load(xd, (p, 0), shape=(BLOCK, 64)))


@tessel.jit
def counts(keys, out, n, bins, BLOCK: tl.constexpr):
    """out[k] += 1 for each of this program's BLOCK keys in [0, bins) (a masked i32 add)."""
    p = tl.program_id(0)
    kd = tl.make_desc(keys, shape=(n,), strides=(1,))
    od = tl.make_desc(out, shape=(bins,), strides=(1,))
    for i in range(0, BLOCK):
        k = tl.load_scalar(kd, (p * BLOCK + i,), padding=-1)
        ok = tl.full((1,), (k >= 0) & (k < bins), tl.int1)
        tl.atomic_add(od, (tl.maximum(k, 0),), tl.full((1,), 1, tl.int32), mask=ok)


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
    launch(overlapping, (n,), codegen, x, out, n, BLOCK=block)
    times = torch.clamp(torch.arange(n, device="cuda") + 1, max=block)[:, None].double()
    ref = 1 + times * x.double()
    assert ((out.double() - ref).abs().max() / ref.abs().max()).item() < 1e-6


@pytest.mark.parametrize("codegen", ["auto", "reference"])
def test_int32_counts(codegen):
    gen = torch.Generator(device="cuda").manual_seed(2)
    keys = torch.randint(-3, 40, (5000,), device="cuda", generator=gen, dtype=torch.int32)
    out = torch.zeros(37, device="cuda", dtype=torch.int32)
    launch(counts, (-(-5000 // 8),), codegen, keys, out, 5000, 37, BLOCK=8)
    kept = keys[(keys >= 0) & (keys < 37)].long()
    assert out.tolist() == torch.bincount(kept, minlength=37).tolist()
