"""GEMM with a fused epilogue: C = activation(A·B + bias), written as Triton users write it.

One program per BM×BN block of C. Its loop walks K in steps of BK, loading a BM×BK block of A
and a BK×BN block of B and accumulating their product in f32; blocks that run past M, N or K
read zeros (the loads' bounds), and the store drops what lies outside C. The epilogue adds a
float32 bias row (loaded as a 1-D tile, broadcast over the rows) and applies relu or tanh-GELU
before the cast to C's dtype.

N and K are compile-time constants (one kernel per shape, cached): the rows of A and B are
then copied in 16-byte pieces into shared memory and multiplied by the tensor cores (wgmma on
sm_90a, mma.sync on sm_80), which needs row strides that are known multiples of 8 elements.
`strided_matmul_kernel` is the same loop with run-time sizes and strides (Triton's tutorial
form): one kernel for every shape and layout, its copies checked at run time.

`matmul_tuned` is the same kernel under tessel.autotune: on CUDA tensors it times CONFIGS once
per (M, N, K) and dtypes and keeps the fastest.

    python3 examples/python/gemm.py          # the interpreter; the GPU too where torch sees one
"""
from _common import (as_float64, cdiv, contiguous, cuda_torch, empty, next_power_of_2, np,
                     zeros)
from elementwise import gelu_tanh
import tessel
from tessel import language as tl

ACTIVATIONS = ("", "relu", "gelu_tanh")


@tessel.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, M, N: tl.constexpr, K: tl.constexpr,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, HAS_BIAS: tl.constexpr,
                  ACTIVATION: tl.constexpr, GROUP_M: tl.constexpr = 1):
    # One program per block of C. With GROUP_M > 1, GROUP_M consecutive programs share their
    # column block of B and walk GROUP_M row blocks of A (Triton's L2 grouping); measured on
    # the H200 at 4096³ with 128x128 blocks, row-major order (GROUP_M = 1) was faster: 645
    # against 566 TFLOP/s (bench/results/2026-12-02-h200-gemm/run3).
    pid = tl.program_id(0)
    blocks_n = tl.cdiv(N, BN)
    in_group = GROUP_M * blocks_n
    first_m = pid // in_group * GROUP_M
    group_m = min(tl.cdiv(M, BM) - first_m, GROUP_M)
    pid_m = first_m + pid % in_group % group_m
    pid_n = pid % in_group // group_m
    ad = tl.make_desc(a_ptr, shape=(M, K), strides=(K, 1))
    bd = tl.make_desc(b_ptr, shape=(K, N), strides=(N, 1))
    cd = tl.make_desc(c_ptr, shape=(M, N), strides=(N, 1))
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = tl.load(ad, (pid_m * BM, k), shape=(BM, BK))
        b = tl.load(bd, (k, pid_n * BN), shape=(BK, BN))
        acc += tl.dot(a, b)
    if HAS_BIAS:
        biasd = tl.make_desc(bias_ptr, shape=(N,), strides=(1,))
        acc = acc + tl.load(biasd, (pid_n * BN,), shape=(BN,))[None, :]
    if ACTIVATION == "relu":
        acc = tl.maximum(acc, 0.0)
    elif ACTIVATION == "gelu_tanh":
        acc = gelu_tanh(acc)
    tl.store(cd, (pid_m * BM, pid_n * BN), acc.to(c_ptr.dtype))


CONFIGS = [
    # Measured on the H200 (bench/results/2026-12-02-h200-gemm): 128x128x64 with three stages
    # fits two CTAs an SM (2 x 96 KiB) and leads at 4096³; 128x256x64 with four stages keeps
    # its wgmma in flight (tilegpu-async-accumulate); 64-row blocks for skinny M.
    tessel.Config({"BM": 128, "BN": 128, "BK": 64}, num_stages=3),
    tessel.Config({"BM": 128, "BN": 256, "BK": 64}, num_stages=4),
    tessel.Config({"BM": 128, "BN": 128, "BK": 64}, num_stages=4),
    tessel.Config({"BM": 64, "BN": 128, "BK": 64}, num_stages=3),
    tessel.Config({"BM": 64, "BN": 64, "BK": 64}, num_stages=4),
]
matmul_tuned = tessel.autotune(configs=CONFIGS, key=["M", "N", "K"])(matmul_kernel)


def matmul(a, b, bias=None, activation="", out_dtype=None, blocks=None):
    """activation(a @ b + bias) as `out_dtype` (default: a's dtype).

    a [M, K] and b [K, N]: float16 or bfloat16 (numpy: float16 or uint16 bf16 bit patterns; or
    CUDA torch tensors). bias: float32 [N] or None. activation: "", "relu" or "gelu_tanh".
    blocks: (BM, BN, BK) to launch matmul_kernel with those blocks; None to launch matmul_tuned
    (which, on numpy arrays, takes the first of CONFIGS), or on CUDA tensors with at most 64
    rows, K >= 4096 and no epilogue, matmul_split_k."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    (M, K), (K2, N) = a.shape, b.shape
    if K != K2:
        raise ValueError(f"a is {M}x{K} and b is {K2}x{N}: the inner sizes differ")
    a, b = contiguous(a), contiguous(b)
    if blocks is None and bias is None and not activation and M <= 64 and K >= 4096 and \
            (out_dtype is None or out_dtype == a.dtype) and not isinstance(a, np.ndarray):
        # Few rows and a long K: split-K (measured on the H200, fp16, split 4 with 64x128
        # blocks against the tuned kernel: 16x8192x8192 45.1 against 31.1 TFLOP/s, cuBLAS
        # 44.8; 64x8192x8192 173 against 128; 32x4096x4096 48 against 30; at K = 1024 it
        # lost: bench/results/2026-12-02-h200-gemm-tuner/split_k_run1.json).
        return matmul_split_k(a, b, split_k=4, blocks=(64, 128, 64))
    c = empty(a, (M, N), out_dtype)
    # Without a bias, any array stands in for the unused pointer: a (the interpreter copies
    # arrays in and out, so it must not be c).
    args = (a, b, c, a if bias is None else contiguous(bias), M, N, K)
    epilogue = dict(HAS_BIAS=bias is not None, ACTIVATION=activation)
    if blocks is None:
        matmul_tuned[lambda meta: cdiv(M, meta["BM"]) * cdiv(N, meta["BN"])](*args, **epilogue)
    else:
        BM, BN, BK = blocks
        matmul_kernel[cdiv(M, BM) * cdiv(N, BN)](*args, BM=BM, BN=BN, BK=BK, **epilogue)
    return c


@tessel.jit
def matmul_split_k_kernel(a_ptr, b_ptr, part_ptr, M, N: tl.constexpr, K: tl.constexpr,
                          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                          SPLIT_K: tl.constexpr, ATOMIC: tl.constexpr = False):
    # Split-K for few rows (a decode-sized M): program (block of C, s) sums the products of
    # K-slice s, CHUNK = K / SPLIT_K columns of A, into its float32 partial [M, N] (slice s of
    # part); sum_split_k adds the slices. More programs, each streaming less of B. With ATOMIC
    # every program adds its partial into one zeroed float32 [M, N] instead (tl.atomic_add).
    pid = tl.program_id(0)
    s = tl.program_id(1)
    blocks_n = tl.cdiv(N, BN)
    pid_m = pid // blocks_n
    pid_n = pid % blocks_n
    chunk = tl.cdiv(tl.cdiv(K, SPLIT_K), BK) * BK
    ad = tl.make_desc(a_ptr, shape=(M, K), strides=(K, 1))
    bd = tl.make_desc(b_ptr, shape=(K, N), strides=(N, 1))
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(s * chunk, tl.minimum((s + 1) * chunk, K), BK):
        a = tl.load(ad, (pid_m * BM, k), shape=(BM, BK))
        b = tl.load(bd, (k, pid_n * BN), shape=(BK, BN))
        acc += tl.dot(a, b)
    if ATOMIC:
        cd = tl.make_desc(part_ptr, shape=(M, N), strides=(N, 1))
        tl.atomic_add(cd, (pid_m * BM, pid_n * BN), acc)
    else:
        pd = tl.make_desc(part_ptr, shape=(M, N), strides=(N, 1), offset=s * M * N)
        tl.store(pd, (pid_m * BM, pid_n * BN), acc)


@tessel.jit
def sum_split_k(part_ptr, c_ptr, M, N, SPLIT_K: tl.constexpr, BLOCK_R: tl.constexpr,
                BLOCK_C: tl.constexpr):
    # c = Σ_s part[s] as c's dtype; a loop whose sum stays in registers (convert-tile-to-blocked).
    r0 = tl.program_id(0) * BLOCK_R
    c0 = tl.program_id(1) * BLOCK_C
    pd = tl.make_desc(part_ptr, shape=(SPLIT_K * M, N), strides=(N, 1))
    acc = tl.zeros((BLOCK_R, BLOCK_C), tl.float32)
    for s in range(0, SPLIT_K):
        acc += tl.load(pd, (s * M + r0, c0), shape=(BLOCK_R, BLOCK_C))
    cd = tl.make_desc(c_ptr, shape=(M, N), strides=(N, 1))
    tl.store(cd, (r0, c0), acc.to(c_ptr.dtype))


def matmul_split_k(a, b, split_k=4, blocks=(64, 64, 64), num_stages=4, atomic=False):
    """a @ b by split-K: split_k programs per block of C, each over a slice of K, and a second
    program that adds their float32 partials (a workspace of split_k x M x N floats) and casts.
    With `atomic`, the programs add their partials into one zeroed float32 M x N with
    tl.atomic_add (a workspace split_k times smaller; the order of the float32 additions, so
    the last bits, vary from run to run) and the second program only casts. For products whose
    M is too small to fill the GPU with blocks of C (16 x 8192 x 8192)."""
    (M, K), (_, N) = a.shape, b.shape
    a, b = contiguous(a), contiguous(b)
    BM, BN, BK = blocks
    part = zeros(a, (M, N), "float32") if atomic else empty(a, (split_k, M, N), "float32")
    c = empty(a, (M, N))
    matmul_split_k_kernel.with_options(num_stages=num_stages)[
        (cdiv(M, BM) * cdiv(N, BN), split_k)](a, b, part, M, N, K, BM=BM, BN=BN, BK=BK,
                                                SPLIT_K=split_k, ATOMIC=atomic)
    rows = min(16, next_power_of_2(M))
    sum_split_k[(cdiv(M, rows), cdiv(N, 256))](part, c, M, N, SPLIT_K=1 if atomic else split_k,
                                               BLOCK_R=rows, BLOCK_C=256)
    return c


@tessel.jit
def strided_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk,
                          stride_bn, stride_cm, stride_cn, BM: tl.constexpr, BN: tl.constexpr,
                          BK: tl.constexpr):
    # Triton's tutorial form: sizes and strides are run-time arguments, so one kernel serves
    # every shape and layout (a transposed view, a column slice). Blocks whose rows are
    # contiguous, a multiple of 8 elements apart and 16-byte aligned are copied in 16-byte
    # pieces; others element by element (decided per block at run time).
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    ad = tl.make_desc(a_ptr, shape=(M, K), strides=(stride_am, stride_ak))
    bd = tl.make_desc(b_ptr, shape=(K, N), strides=(stride_bk, stride_bn))
    cd = tl.make_desc(c_ptr, shape=(M, N), strides=(stride_cm, stride_cn))
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = tl.load(ad, (pid_m * BM, k), shape=(BM, BK))
        b = tl.load(bd, (k, pid_n * BN), shape=(BK, BN))
        acc += tl.dot(a, b)
    tl.store(cd, (pid_m * BM, pid_n * BN), acc.to(c_ptr.dtype))


def matmul_strided(a, b, blocks=(128, 128, 64), num_stages=3):
    """a @ b for CUDA torch tensors of any strides (no copy), float16 or bfloat16."""
    (M, K), (_, N) = a.shape, b.shape
    c = empty(a, (M, N))
    BM, BN, BK = blocks
    strided_matmul_kernel.with_options(num_stages=num_stages)[(cdiv(M, BM), cdiv(N, BN))](
        a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(), BM=BM, BN=BN, BK=BK)
    return c


def reference(a, b, bias=None, activation=""):
    """float64 numpy activation(a @ b + bias)."""
    c = as_float64(a) @ as_float64(b)
    if bias is not None:
        c = c + as_float64(bias)
    if activation == "relu":
        c = np.maximum(c, 0.0)
    elif activation == "gelu_tanh":
        c = 0.5 * c * (1.0 + np.tanh(0.7978845608028654 * (c + 0.044715 * c ** 3)))
    return c


def main():
    rng = np.random.default_rng(0)
    M, N, K = 70, 50, 40
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    bias = rng.standard_normal(N).astype(np.float32)
    for activation in ACTIVATIONS:
        c = matmul(a, b, bias, activation, out_dtype=np.float32, blocks=(32, 32, 32))
        err = np.abs(as_float64(c) - reference(a, b, bias, activation)).max()
        print(f"gemm {M}x{N}x{K} +bias {activation or 'no activation'} (interpreter, f16 -> f32): "
              f"max error vs float64 {err:.2e}")
    torch = cuda_torch()
    if torch is not None:
        at = torch.randn(1000, 600, device="cuda", dtype=torch.float16)
        bt = torch.randn(600, 700, device="cuda", dtype=torch.float16)
        ct = matmul(at, bt)
        err = np.abs(as_float64(ct) - reference(at, bt)).max()
        print(f"gemm 1000x700x600 (GPU, f16, {matmul_tuned.best_config}): max error vs float64 "
              f"{err:.2e}")


if __name__ == "__main__":
    main()
