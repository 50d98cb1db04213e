"""Tile programs beyond attention on the GPU (issue 18): the examples/python GEMM, row softmax,
layer norm and element-wise chain on CUDA tensors, against float64 torch references.

Run on a machine with a GPU and torch (skipped elsewhere):
    TESSEL_CACHE_DIR=$(mktemp -d) python3 -m pytest -q test/gpu/test_tile_programs_gpu.py
with tessel importable (PYTHONPATH=build/python, or the GPU bundle's python/). Inputs are fresh
random tensors at ragged sizes, fp16 and bf16; every output the examples allocate is poisoned
with NaN first, so an element a kernel forgets to write fails the comparison. The autotuned
launches (blocks=None) tune on the first call of each size; their choices go to a temporary
directory.
"""
import os
import pathlib
import sys
import tempfile
import zlib

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tessel  # noqa: E402
from tessel import language as tl  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"))
import _common  # noqa: E402
import elementwise  # noqa: E402
import gemm  # noqa: E402
import layer_norm  # noqa: E402
import softmax  # noqa: E402

tuning = sys.modules["tessel.autotune"]
if "TESSEL_CACHE_DIR" not in os.environ:     # the tuned choices go beside it
    os.environ["TESSEL_CACHE_DIR"] = tempfile.mkdtemp(prefix="tessel-tile-programs-")
DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
# Of the error relative to the largest |value|: one rounding of the output, f32 sums.
TOL = {"f16": 2e-3, "bf16": 1.6e-2, "f32": 1e-4}


@pytest.fixture(autouse=True)
def poisoned_outputs(monkeypatch):
    def empty(like, shape, dtype=None):
        return _common.empty(like, shape, dtype).fill_(float("nan"))
    for module in (gemm, softmax, layer_norm, elementwise):
        monkeypatch.setattr(module, "empty", empty)


def rand(shape, dtype, gen, scale=1.0, shift=0.0):
    x = torch.randn(shape, generator=gen, device="cuda", dtype=torch.float32) * scale + shift
    return x.to(DTYPES[dtype])


def rel_error(out, ref):
    """max |out - ref| / max(1, max |ref|), NaN-aware (a NaN anywhere is an error of inf)."""
    out = out.double()
    if torch.isnan(out).any() and not torch.isnan(ref).any():
        return float("inf")
    return ((out - ref).abs().max() / max(1.0, ref.abs().max().item())).item()


def triton_cdiv(a, b):
    return -(-a // b)


def gen_for(*seed):
    return torch.Generator(device="cuda").manual_seed(zlib.crc32(repr(seed).encode()))


# --- GEMM ---------------------------------------------------------------------------------------

GEMM_SIZES = [(70, 50, 40), (129, 257, 65), (1000, 700, 600), (16, 1024, 2048)]


def gemm_reference(a, b, bias=None, activation=""):
    c = a.double() @ b.double()
    if bias is not None:
        c = c + bias.double()
    if activation == "relu":
        c = c.clamp_min(0)
    elif activation == "gelu_tanh":
        c = torch.nn.functional.gelu(c, approximate="tanh")
    return c


@pytest.mark.parametrize("blocks", [(64, 64, 32), None], ids=["64x64x32", "tuned"])
@pytest.mark.parametrize("dtype,out", [("f16", "f16"), ("bf16", "bf16"), ("f16", "f32")])
@pytest.mark.parametrize("size", GEMM_SIZES, ids=[f"{m}x{n}x{k}" for m, n, k in GEMM_SIZES])
def test_gemm(size, dtype, out, blocks):
    M, N, K = size
    gen = gen_for(size, dtype, out)
    a, b = rand((M, K), dtype, gen), rand((K, N), dtype, gen)
    c = gemm.matmul(a, b, out_dtype=DTYPES[out], blocks=blocks)
    torch.cuda.synchronize()
    assert c.dtype == DTYPES[out] and c.shape == (M, N)
    assert rel_error(c, gemm_reference(a, b)) < TOL[out]
    if blocks is None:
        assert gemm.matmul_tuned.best_config in gemm.CONFIGS


@pytest.mark.parametrize("atomic", [False, True], ids=["partials", "atomic"])
@pytest.mark.parametrize("split_k", [2, 4, 7])
@pytest.mark.parametrize("size", [(16, 1000, 4100), (5, 256, 8192), (64, 130, 4096)],
                         ids=lambda s: "x".join(map(str, s)))
def test_gemm_split_k(size, split_k, atomic):
    # Slices of K summed by a second program, or added by tl.atomic_add from the accumulators'
    # registers (red.global.add.f32); ragged M, N and K, split counts that do not divide K;
    # gemm.matmul takes the partials' path by default for M <= 64 and K >= 4096.
    M, N, K = size
    gen = gen_for("split_k", size, split_k)
    a, b = rand((M, K), "f16", gen), rand((K, N), "f16", gen)
    c = gemm.matmul_split_k(a, b, split_k=split_k, blocks=(64, 128, 64), atomic=atomic)
    assert c.dtype == a.dtype and rel_error(c, gemm_reference(a, b)) < TOL["f16"]
    assert rel_error(gemm.matmul(a, b), gemm_reference(a, b)) < TOL["f16"]


def _strided_case(case, dtype, gen):
    """(a, b) views of the layout `case` names, for a 200x131x120 (M x N x K) product."""
    M, N, K = 200, 131, 120
    if case == "contiguous":
        return rand((M, K), dtype, gen), rand((K, N), dtype, gen)
    if case == "b_transposed":             # b's inner stride is K: no 16-byte rows
        return rand((M, K), dtype, gen), rand((N, K), dtype, gen).t()
    if case == "a_misaligned":             # a starts one element into its storage
        return rand((M, K + 1), dtype, gen)[:, 1:], rand((K, N), dtype, gen)
    if case == "padded_rows":              # rows 136 apart (a multiple of 8) with 131 used
        return rand((M, K), dtype, gen), rand((K, 136), dtype, gen)[:, :N]
    raise ValueError(case)


@pytest.mark.parametrize("case", ["contiguous", "b_transposed", "a_misaligned", "padded_rows"])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_gemm_runtime_strides(case, dtype):
    # One kernel (sizes and strides are run-time arguments) on every layout: 16-byte copies
    # where the block allows them, element by element where not, decided at run time.
    a, b = _strided_case(case, dtype, gen_for("strided", case, dtype))
    for blocks in ((128, 128, 64), (64, 64, 32)):
        c = gemm.matmul_strided(a, b, blocks)
        err = rel_error(c, a.double() @ b.double())
        assert err < TOL[dtype], (case, blocks, err)


@pytest.mark.parametrize("activation", gemm.ACTIVATIONS)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_gemm_epilogue(activation, dtype):
    gen = gen_for(activation, dtype)
    M, N, K = 300, 200, 96
    a, b = rand((M, K), dtype, gen), rand((K, N), dtype, gen)
    bias = rand((N,), "f32", gen, scale=4.0)
    for blocks in ((64, 64, 32), (32, 32, 32)):
        c = gemm.matmul(a, b, bias, activation, blocks=blocks)
        torch.cuda.synchronize()
        assert rel_error(c, gemm_reference(a, b, bias, activation)) < TOL[dtype], blocks


# --- column reductions ---------------------------------------------------------------------------

@tessel.jit
def column_sums_kernel(x_ptr, y_ptr, R, C, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # The sums over the rows of a [R, C] matrix, BLOCK_C columns a program (R <= BLOCK_R): a
    # layer norm backward's weight gradient has this shape.
    c0 = tl.program_id(0) * BLOCK_C
    xd = tl.make_desc(x_ptr, shape=(R, C), strides=(C, 1))
    x = tl.load(xd, (0, c0), shape=(BLOCK_R, BLOCK_C)).to(tl.float32)
    tl.store(tl.make_desc(y_ptr, shape=(C,), strides=(1,)), (c0,), tl.sum(x, 0))


@pytest.mark.parametrize("rows,block", [(2, (2, 64)), (50, (64, 64)), (16, (16, 256)),
                                        (100, (128, 32)), (7, (32, 1024))])
@pytest.mark.parametrize("num_warps", [4, 8])
def test_column_sums(rows, block, num_warps):
    # Rows fewer than the threads cover (repeated rows add nothing), a warp holding several
    # rows (shuffles), warps holding other rows of the same columns (shared memory).
    gen = gen_for("columns", rows, block, num_warps)
    C = 3 * block[1] - 5
    x = rand((rows, C), "f16", gen)
    y = torch.full((C,), float("nan"), device="cuda")
    column_sums_kernel.with_options(num_warps=num_warps)[(triton_cdiv(C, block[1]),)](
        x, y, rows, C, BLOCK_R=block[0], BLOCK_C=block[1])
    assert rel_error(y, x.double().sum(0)) < 1e-5


# --- softmax and layer norm ---------------------------------------------------------------------

ROW_SIZES = [(37, 1000), (4096, 1000), (3, 8192), (1000, 77)]


@pytest.mark.parametrize("block_r", [1, 4, None], ids=["1row", "4rows", "tuned"])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("size", ROW_SIZES, ids=[f"{r}x{c}" for r, c in ROW_SIZES])
def test_softmax(size, dtype, block_r):
    R, C = size
    if block_r == 4 and C > 2048:
        pytest.skip("4 rows of 8192 need more shared memory than the reference lowering has")
    gen = gen_for(size, dtype)
    x = rand((R, C), dtype, gen, scale=4.0)
    x[R // 2, 1::3] = float("-inf")
    y = softmax.softmax(x, block_r=block_r)
    torch.cuda.synchronize()
    ref = torch.softmax(x.double(), dim=-1)
    assert y.dtype == x.dtype and rel_error(y, ref) < TOL[dtype]
    assert (y[R // 2, 1::3] == 0).all()


@pytest.mark.parametrize("block_r", [1, 2, None], ids=["1row", "2rows", "tuned"])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("size", ROW_SIZES, ids=[f"{r}x{c}" for r, c in ROW_SIZES])
def test_layer_norm(size, dtype, block_r):
    R, C = size
    if block_r == 2 and C > 2048:
        pytest.skip("2 rows of 8192 need more shared memory than the reference lowering has")
    gen = gen_for(size, dtype, "ln")
    x = rand((R, C), dtype, gen, scale=3.0, shift=1.0)
    w, b = rand((C,), "f32", gen), rand((C,), "f32", gen)
    y, mean, rstd = layer_norm.layer_norm(x, w, b, eps=1e-5, block_r=block_r)
    torch.cuda.synchronize()
    xd = x.double()
    ref_mean = xd.mean(-1)
    ref_rstd = (xd.var(-1, unbiased=False) + 1e-5).rsqrt()
    ref = torch.nn.functional.layer_norm(xd, (C,), w.double(), b.double(), eps=1e-5)
    assert y.dtype == x.dtype and rel_error(y, ref) < 2 * TOL[dtype]
    assert rel_error(mean, ref_mean) < 1e-5
    assert ((rstd.double() - ref_rstd).abs().max() / ref_rstd.max()).item() < 1e-4


CHUNKED = [(37, 1000, 256, 1, 4), (64, 10000, 2048, 1, 4), (33, 10000, 2048, 2, 8),
           (16, 40000, 4096, 1, 8), (5, 100, 64, 4, 4)]


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("case", CHUNKED, ids=[f"{r}x{c}-by{k}-{br}rows-{w}warps"
                                               for r, c, k, br, w in CHUNKED])
def test_layer_norm_in_passes(case, dtype):
    """layer_norm_chunked_kernel: three loops over column chunks whose partial sums the loops
    carry in registers (convert-tile-to-blocked's loops), ragged rows and row counts."""
    R, C, chunk, block_r, warps = case
    gen = gen_for((R, C), dtype, "lnc")
    x = rand((R, C), dtype, gen, scale=3.0, shift=1.0)
    w, b = rand((C,), "f32", gen), rand((C,), "f32", gen)
    y, mean, rstd = empty_like_ln(x)
    kernel = layer_norm.layer_norm_chunked_kernel.with_options(num_warps=warps)
    kernel[(-(-R // block_r),)](x, w, b, y, mean, rstd, R, C, 1e-5, BLOCK_R=block_r,
                                BLOCK_C=chunk)
    torch.cuda.synchronize()
    xd = x.double()
    ref = torch.nn.functional.layer_norm(xd, (C,), w.double(), b.double(), eps=1e-5)
    assert rel_error(y, ref) < 2 * TOL[dtype]
    assert rel_error(mean, xd.mean(-1)) < 1e-5
    ref_rstd = (xd.var(-1, unbiased=False) + 1e-5).rsqrt()
    assert ((rstd.double() - ref_rstd).abs().max() / ref_rstd.max()).item() < 1e-4


def empty_like_ln(x):
    R = x.shape[0]
    return (torch.empty_like(x), torch.empty(R, device="cuda", dtype=torch.float32),
            torch.empty(R, device="cuda", dtype=torch.float32))


@pytest.mark.parametrize("dtypes", [("f16", "f16", "f16"), ("bf16", "f32", "bf16"),
                                    ("f32", "f16", "f32")], ids=lambda d: "-".join(d))
@pytest.mark.parametrize("n", [1, 1000, 1 << 20 | 3])
def test_scale_add_gelu(n, dtypes):
    gen = gen_for(n, dtypes)
    x, y = rand((n,), dtypes[0], gen, scale=3.0), rand((n,), dtypes[1], gen)
    o = elementwise.scale_add_gelu(x, y, 0.75, out_dtype=DTYPES[dtypes[2]])
    torch.cuda.synchronize()
    ref = torch.nn.functional.gelu(x.double() * 0.75 + y.double(), approximate="tanh")
    assert o.dtype == DTYPES[dtypes[2]] and rel_error(o, ref) < TOL[dtypes[2]]


# --- the autotuner's timing -----------------------------------------------------------------

def test_cuda_time_measures_work():
    x = torch.randn(2048, 2048, device="cuda")
    small = tuning.cuda_time(lambda: x[:256, :256] @ x[:256, :256], lambda: None, 2, 5, 0)
    large = tuning.cuda_time(lambda: x @ x, lambda: None, 2, 5, 0)
    assert 0 < small < large


def test_the_tuned_choice_is_on_disk_and_reused(monkeypatch):
    gen = gen_for("disk")
    a, b = rand((200, 96), "f16", gen), rand((96, 300), "f16", gen)
    gemm.matmul(a, b)
    chosen = gemm.matmul_tuned.best_config
    directory = tuning.tuning_directory()
    assert any(name.startswith("matmul_kernel-") for name in os.listdir(directory))

    def no_timing(*args):
        raise AssertionError("timed again")
    monkeypatch.setattr(tuning, "cuda_time", no_timing)
    again = tessel.autotune(configs=gemm.CONFIGS, key=["M", "N", "K"])(gemm.matmul_kernel)
    c = _common.empty(a, (200, 300)).fill_(float("nan"))
    # gemm.matmul_kernel numbers its blocks on one grid axis (GROUP_M).
    again[lambda m: _common.cdiv(200, m["BM"]) * _common.cdiv(300, m["BN"])](
        a, b, c, a, 200, 300, 96, HAS_BIAS=False, ACTIVATION="")
    torch.cuda.synchronize()
    assert again.best_config == chosen
    assert rel_error(c, gemm_reference(a, b)) < TOL["f16"]
