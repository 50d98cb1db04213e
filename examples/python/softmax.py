"""Row softmax of a [R, C] matrix: a block of BLOCK_R whole rows per program.

Each program loads BLOCK_R rows into a BLOCK_R×BLOCK_C tile (BLOCK_C, a power of two, holds a
whole row: C is at most BLOCK_C). Columns past C are padded with -inf by the load, so they add
exp(-inf) = 0 to the sum; rows past R are never stored. The row's maximum is subtracted before
the exponential, as torch.softmax does, so large inputs do not overflow; -inf entries give 0.

`softmax_tuned` times BLOCK_R and num_warps on CUDA tensors, once per (R, C) and dtype.

    python3 examples/python/softmax.py       # the interpreter; the GPU too where torch sees one
"""
from _common import as_float64, cdiv, contiguous, cuda_torch, empty, next_power_of_2, np
import tessel
from tessel import language as tl


@tessel.jit
def softmax_kernel(x_ptr, y_ptr, R, C, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    r0 = tl.program_id(0) * BLOCK_R
    xd = tl.make_desc(x_ptr, shape=(R, C), strides=(C, 1))
    yd = tl.make_desc(y_ptr, shape=(R, C), strides=(C, 1))
    x = tl.load(xd, (r0, 0), shape=(BLOCK_R, BLOCK_C), padding=float("-inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 1)[:, None])
    y = e / tl.sum(e, 1)[:, None]
    tl.store(yd, (r0, 0), y.to(y_ptr.dtype))


# Whole rows in registers (convert-tile-to-blocked): 16 or 32 warps keep few registers a
# thread on 8192-wide rows (measured on the H200: docs/bench/2026-12-02-h200-tile-programs.md).
CONFIGS = [tessel.Config({"BLOCK_R": r}, num_warps=w)
           for r in (1, 2, 4, 8) for w in (4, 8, 16, 32)]
softmax_tuned = tessel.autotune(configs=CONFIGS, key=["R", "C"])(softmax_kernel)


def softmax(x, block_r=None):
    """softmax(x, axis=-1) of a 2-D x (numpy: float32, float16 or uint16 bf16 bit patterns; or a
    CUDA torch tensor), in x's dtype. block_r: rows per program; None to launch softmax_tuned
    (which, on numpy arrays, takes the first of CONFIGS)."""
    R, C = x.shape
    x = contiguous(x)
    y = empty(x, (R, C))
    block_c = next_power_of_2(C)
    if block_r is None:
        softmax_tuned[lambda meta: (cdiv(R, meta["BLOCK_R"]),)](x, y, R, C, BLOCK_C=block_c)
    else:
        softmax_kernel[(cdiv(R, block_r),)](x, y, R, C, BLOCK_R=block_r, BLOCK_C=block_c)
    return y


def reference(x):
    """float64 numpy softmax over the last axis."""
    x = as_float64(x)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def main():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((37, 1000)).astype(np.float16)
    x[3, 100:900] = -np.inf
    y = softmax(x, block_r=4)
    print(f"softmax 37x1000 in 1024-wide blocks (interpreter, f16): max error vs float64 "
          f"{np.abs(as_float64(y) - reference(x)).max():.2e}")
    torch = cuda_torch()
    if torch is not None:
        xt = torch.randn(4096, 1000, device="cuda", dtype=torch.float16)
        y = softmax(xt)
        print(f"softmax 4096x1000 (GPU, f16, {softmax_tuned.best_config}): max error vs "
              f"float64 {np.abs(as_float64(y) - reference(xt)).max():.2e}")


if __name__ == "__main__":
    main()
