"""A fused element-wise chain: out = gelu(x * scale + y), cast to the output's dtype, in one pass.

One program per BLOCK elements of the flattened arrays; the last block reads zeros past n and
its store drops them. The arithmetic is f32 whatever the inputs' dtypes; `gelu_tanh` is a
@tessel.jit function that kernels call (gemm.py's epilogue uses it too).

    python3 examples/python/elementwise.py   # the interpreter; the GPU too where torch sees one
"""
from _common import as_float64, cdiv, contiguous, cuda_torch, empty, np
import tessel
from tessel import language as tl

SQRT_2_OVER_PI = 0.7978845608028654


@tessel.jit
def gelu_tanh(x):
    # PyTorch's gelu(approximate="tanh").
    return 0.5 * x * (1.0 + tl.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))


@tessel.jit
def scale_add_gelu_kernel(x_ptr, y_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    start = tl.program_id(0) * BLOCK
    xd = tl.make_desc(x_ptr, shape=(n,), strides=(1,))
    yd = tl.make_desc(y_ptr, shape=(n,), strides=(1,))
    od = tl.make_desc(out_ptr, shape=(n,), strides=(1,))
    x = tl.load(xd, (start,), shape=(BLOCK,)).to(tl.float32)
    y = tl.load(yd, (start,), shape=(BLOCK,)).to(tl.float32)
    tl.store(od, (start,), gelu_tanh(x * scale + y).to(out_ptr.dtype))


def scale_add_gelu(x, y, scale, out_dtype=None, block=1024):
    """gelu_tanh(x * scale + y) element-wise, as `out_dtype` (default: x's dtype).

    x, y: arrays of one shape (numpy: float32, float16 or uint16 bf16 bit patterns; or CUDA torch
    tensors), of any dtypes tessel loads."""
    if tuple(x.shape) != tuple(y.shape):
        raise ValueError(f"x and y differ in shape: {tuple(x.shape)} and {tuple(y.shape)}")
    x, y = contiguous(x), contiguous(y)
    out = empty(x, tuple(x.shape), out_dtype)
    n = x.size if isinstance(x, np.ndarray) else x.numel()
    scale_add_gelu_kernel[(cdiv(n, block),)](x, y, out, n, float(scale), BLOCK=block)
    return out


def reference(x, y, scale):
    """float64 numpy gelu_tanh(x * scale + y)."""
    z = as_float64(x) * scale + as_float64(y)
    return 0.5 * z * (1.0 + np.tanh(SQRT_2_OVER_PI * (z + 0.044715 * z ** 3)))


def main():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((37, 301)).astype(np.float16)
    y = rng.standard_normal((37, 301)).astype(np.float32)
    out = scale_add_gelu(x, y, 0.5)
    print(f"scale_add_gelu (interpreter, f16): max error vs float64 "
          f"{np.abs(as_float64(out) - reference(x, y, 0.5)).max():.2e}")
    torch = cuda_torch()
    if torch is not None:
        xt = torch.randn(4096, 1000, device="cuda", dtype=torch.bfloat16)
        yt = torch.randn(4096, 1000, device="cuda", dtype=torch.bfloat16)
        out = scale_add_gelu(xt, yt, 0.5)
        print(f"scale_add_gelu (GPU, bf16): max error vs float64 "
              f"{np.abs(as_float64(out) - reference(xt, yt, 0.5)).max():.2e}")


if __name__ == "__main__":
    main()
