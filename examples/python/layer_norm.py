"""Layer norm forward over the last axis of a [R, C] matrix: y = (x - mean) * rstd * w + b.

A block of BLOCK_R whole rows per program, as in softmax.py; columns past C load as 0, so the
mean's sum is right as it is, and the centred values are masked to 0 past C before the variance
(biased, as torch's). Like PyTorch's native_layer_norm it also stores each row's mean and
rstd = 1 / sqrt(var + eps) in float32 (what a backward would reuse).

`layer_norm_tuned` times BLOCK_R and num_warps on CUDA tensors, once per (R, C) and dtypes.
`layer_norm_chunked_kernel` walks rows longer than one block in passes (loops whose partial
sums stay in registers on the GPU).

    python3 examples/python/layer_norm.py    # the interpreter; the GPU too where torch sees one
"""
from _common import as_float64, cdiv, contiguous, cuda_torch, empty, next_power_of_2, np
import tessel
from tessel import language as tl


@tessel.jit
def row_descriptors(x_ptr, w_ptr, b_ptr, y_ptr, R, C):
    """x and y [R, C] (rows packed), the weight and bias [C]."""
    return (tl.make_desc(x_ptr, shape=(R, C), strides=(C, 1)),
            tl.make_desc(y_ptr, shape=(R, C), strides=(C, 1)),
            tl.make_desc(w_ptr, shape=(C,), strides=(1,)),
            tl.make_desc(b_ptr, shape=(C,), strides=(1,)))


@tessel.jit
def store_statistics(mean_ptr, rstd_ptr, R, r0, mean, rstd):
    tl.store(tl.make_desc(mean_ptr, shape=(R,), strides=(1,)), (r0,), mean)
    tl.store(tl.make_desc(rstd_ptr, shape=(R,), strides=(1,)), (r0,), rstd)


@tessel.jit
def layer_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, R, C, eps,
                      BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    r0 = tl.program_id(0) * BLOCK_R
    xd, yd, wd, bd = row_descriptors(x_ptr, w_ptr, b_ptr, y_ptr, R, C)
    x = tl.load(xd, (r0, 0), shape=(BLOCK_R, BLOCK_C)).to(tl.float32)
    # The weight and bias are read before the reductions, so that their loads are in flight
    # while the row's sums are computed (the GPU issues loads where the program has them).
    w = tl.load(wd, (0,), shape=(BLOCK_C,)).to(tl.float32)
    b = tl.load(bd, (0,), shape=(BLOCK_C,)).to(tl.float32)
    mean = tl.sum(x, 1) / C
    inside = (tl.arange(0, BLOCK_C) < C)[None, :]
    centred = tl.where(inside, x - mean[:, None], 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(centred * centred, 1) / C + eps)
    y = centred * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(yd, (r0, 0), y.to(y_ptr.dtype))
    store_statistics(mean_ptr, rstd_ptr, R, r0, mean, rstd)


@tessel.jit
def layer_norm_chunked_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, R, C, eps,
                              BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # Rows longer than one block, in passes over BLOCK_C columns: the sums, then the centred
    # squares, then the output (x read three times; the later passes mostly from the L2).
    # The loops carry [BLOCK_R, BLOCK_C] partial sums in registers, reduced after each loop.
    r0 = tl.program_id(0) * BLOCK_R
    xd, yd, wd, bd = row_descriptors(x_ptr, w_ptr, b_ptr, y_ptr, R, C)
    sums = tl.zeros((BLOCK_R, BLOCK_C), tl.float32)
    for c in range(0, C, BLOCK_C):
        sums += tl.load(xd, (r0, c), shape=(BLOCK_R, BLOCK_C)).to(tl.float32)
    mean = tl.sum(sums, 1) / C
    squares = tl.zeros((BLOCK_R, BLOCK_C), tl.float32)
    for c in range(0, C, BLOCK_C):
        x = tl.load(xd, (r0, c), shape=(BLOCK_R, BLOCK_C)).to(tl.float32)
        inside = (c + tl.arange(0, BLOCK_C) < C)[None, :]
        centred = tl.where(inside, x - mean[:, None], 0.0)
        squares += centred * centred
    rstd = 1.0 / tl.sqrt(tl.sum(squares, 1) / C + eps)
    for c in range(0, C, BLOCK_C):
        x = tl.load(xd, (r0, c), shape=(BLOCK_R, BLOCK_C)).to(tl.float32)
        w = tl.load(wd, (c,), shape=(BLOCK_C,)).to(tl.float32)
        b = tl.load(bd, (c,), shape=(BLOCK_C,)).to(tl.float32)
        y = (x - mean[:, None]) * rstd[:, None] * w[None, :] + b[None, :]
        tl.store(yd, (r0, c), y.to(y_ptr.dtype))
    store_statistics(mean_ptr, rstd_ptr, R, r0, mean, rstd)


# Whole rows in registers (convert-tile-to-blocked): 16 or 32 warps keep few registers a
# thread on 8192-wide rows (measured on the H200: docs/bench/2026-12-02-h200-tile-programs.md).
CONFIGS = [tessel.Config({"BLOCK_R": r}, num_warps=w)
           for r in (1, 2, 4, 8) for w in (4, 8, 16, 32)]
layer_norm_tuned = tessel.autotune(configs=CONFIGS, key=["R", "C"])(layer_norm_kernel)


# Rows whose power-of-two block is wider than this go in passes of 2048 columns. Measured on
# the H200 (bench/results/2026-12-02-h200-blocked-loops, fp16, GB/s): 4096x10000 one block 1,867,
# passes of 2048 2,424 (torch 1,941); 1024x65536 198 (the block does not fit the registers:
# the reference lowering) against 1,872 (torch 1,571); 4096x8192 one block 2,722, passes 2,501.
WIDE = 8192


def layer_norm(x, weight, bias, eps=1e-5, block_r=None, chunk=None):
    """(y, mean, rstd): layer norm of a 2-D x over its last axis, y in x's dtype, mean and rstd
    float32 [R]. x: numpy float32, float16 or uint16 bf16 bit patterns, or a CUDA torch tensor;
    weight and bias [C], of any dtype tessel loads. block_r: rows per program; None to launch
    layer_norm_tuned (which, on numpy arrays, takes the first of CONFIGS). chunk: columns per
    pass of layer_norm_chunked_kernel (a power of two; block_r rows, default 1) instead of
    whole rows in one block; by default rows wider than WIDE take passes of 2048."""
    R, C = x.shape
    x, weight, bias = contiguous(x), contiguous(weight), contiguous(bias)
    y = empty(x, (R, C))
    mean, rstd = empty(x, (R,), "float32"), empty(x, (R,), "float32")
    args = (x, weight, bias, y, mean, rstd, R, C, float(eps))
    block_c = next_power_of_2(C)
    if chunk is None and block_r is None and block_c > WIDE:
        chunk = 2048
    if chunk is not None:
        rows = block_r or 1
        layer_norm_chunked_kernel[(cdiv(R, rows),)](*args, BLOCK_R=rows, BLOCK_C=chunk)
    elif block_r is None:
        layer_norm_tuned[lambda meta: (cdiv(R, meta["BLOCK_R"]),)](*args, BLOCK_C=block_c)
    else:
        layer_norm_kernel[(cdiv(R, block_r),)](*args, BLOCK_R=block_r, BLOCK_C=block_c)
    return y, mean, rstd


def reference(x, weight, bias, eps=1e-5):
    """float64 numpy (y, mean, rstd)."""
    x = as_float64(x)
    mean = x.mean(axis=-1)
    rstd = 1.0 / np.sqrt(x.var(axis=-1) + eps)
    y = (x - mean[:, None]) * rstd[:, None] * as_float64(weight) + as_float64(bias)
    return y, mean, rstd


def main():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((37, 1000)) * 3 + 1).astype(np.float16)
    w = rng.standard_normal(1000).astype(np.float32)
    b = rng.standard_normal(1000).astype(np.float32)
    ref = reference(x, w, b)
    for how, kw in (("one block", dict(block_r=4)), ("passes of 256", dict(chunk=256))):
        y, mean, rstd = layer_norm(x, w, b, **kw)
        print(f"layer norm 37x1000, {how} (interpreter, f16): max error vs float64 "
              f"{np.abs(as_float64(y) - ref[0]).max():.2e} (y), "
              f"{np.abs(mean - ref[1]).max():.2e} (mean), "
              f"{np.abs(rstd - ref[2]).max() / ref[2].max():.2e} (rstd, relative)")
    torch = cuda_torch()
    if torch is not None:
        xt = torch.randn(4096, 1000, device="cuda", dtype=torch.bfloat16)
        wt, bt = (torch.randn(1000, device="cuda") for _ in range(2))
        y, _, _ = layer_norm(xt, wt, bt)
        print(f"layer norm 4096x1000 (GPU, bf16, {layer_norm_tuned.best_config}): max error vs "
              f"float64 {np.abs(as_float64(y) - reference(xt, wt, bt)[0]).max():.2e}")


if __name__ == "__main__":
    main()
