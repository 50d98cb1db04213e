"""Tile programs beyond attention (issue 18) on the interpreter, against float64 numpy: the GEMM
with its epilogues, row softmax, layer norm and the fused element-wise chain of
examples/python, at ragged sizes, from fp16, bf16 and f32 inputs; and each kernel compiles for
sm_90a and sm_80. test/gpu/test_tile_programs_gpu.py runs the same on the GPU."""
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import tessel
from tessel.reference import max_rel_error

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"
sys.path.insert(0, str(EXAMPLES))

import elementwise  # noqa: E402
import gemm  # noqa: E402
import layer_norm  # noqa: E402
import softmax  # noqa: E402
from _common import as_float64  # noqa: E402

# numpy carries bf16 as uint16 bit patterns.
DTYPES = {"f16": np.float16, "bf16": np.uint16, "f32": np.float32}
# Of the error relative to the largest value: one rounding of the output, and of f32 sums.
TOL = {"f16": 2e-3, "bf16": 1.6e-2, "f32": 2e-5}


def array(values, dtype):
    values = np.asarray(values, np.float32)
    return tessel.to_bf16(values) if dtype == "bf16" else values.astype(DTYPES[dtype])


def rel_error(out, ref):
    return max_rel_error(as_float64(out), ref)


# --- GEMM ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("blocks", [(32, 32, 32), (64, 64, 32), (32, 64, 64)])
@pytest.mark.parametrize("dtype,out", [("f16", "f16"), ("f16", "f32"), ("bf16", "bf16"),
                                       ("bf16", "f32")])
def test_gemm_at_ragged_sizes(blocks, dtype, out):
    rng = np.random.default_rng(sum(blocks))
    M, N, K = 70, 50, 40                    # no size a multiple of any block
    a = array(rng.standard_normal((M, K)), dtype)
    b = array(rng.standard_normal((K, N)), dtype)
    c = gemm.matmul(a, b, out_dtype=DTYPES[out], blocks=blocks)
    assert c.dtype == DTYPES[out] and c.shape == (M, N)
    assert rel_error(c, gemm.reference(a, b)) < TOL[out]


@pytest.mark.parametrize("activation", gemm.ACTIVATIONS)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_gemm_epilogue_bias_and_activation(activation, dtype):
    rng = np.random.default_rng(7)
    M, N, K = 33, 70, 100
    a = array(rng.standard_normal((M, K)), dtype)
    b = array(rng.standard_normal((K, N)), dtype)
    bias = rng.standard_normal(N).astype(np.float32) * 4
    c = gemm.matmul(a, b, bias, activation, blocks=(32, 64, 32))
    ref = gemm.reference(a, b, bias, activation)
    assert rel_error(c, ref) < TOL[dtype]
    before = gemm.reference(a, b, bias)
    if activation == "relu":
        assert (as_float64(c)[before < 0] == 0).all() and (before < 0).any()
    # The bias is really added: without it the result is far from c.
    assert rel_error(c, gemm.reference(a, b, None, activation)) > 5 * TOL[dtype]


def test_gemm_autotuned_on_the_interpreter_takes_the_first_config():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((20, 24)).astype(np.float16)
    b = rng.standard_normal((24, 10)).astype(np.float16)
    c = gemm.matmul(a, b, out_dtype=np.float32)
    assert gemm.matmul_tuned.best_config == gemm.CONFIGS[0]
    assert rel_error(c, gemm.reference(a, b)) < TOL["f32"]


def test_gemm_refuses_mismatched_shapes():
    a = np.zeros((4, 5), np.float16)
    with pytest.raises(ValueError, match="inner sizes differ"):
        gemm.matmul(a, a)
    with pytest.raises(ValueError, match="activation must be one of"):
        gemm.matmul(a, a.T, activation="tanh")


# --- softmax ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("R,C,block_r", [(37, 1000, 4), (5, 1, 2), (9, 64, 8), (3, 130, 1)])
def test_softmax_rows(dtype, R, C, block_r):
    rng = np.random.default_rng(R * C)
    x = rng.standard_normal((R, C)) * 4
    if C > 2:
        x[R // 2, 1::2] = -np.inf           # a row with masked entries
        x[0, :] = 50.0                      # large values: the max is subtracted first
        x[0, -1] = -np.inf
    xa = array(x, dtype)
    y = softmax.softmax(xa, block_r=block_r)
    ref = softmax.reference(xa)
    assert y.dtype == xa.dtype and rel_error(y, ref) < TOL[dtype]
    if C > 2:
        assert (as_float64(y)[R // 2, 1::2] == 0).all()


def test_softmax_row_of_minus_infinity_is_nan_as_in_torch():
    x = np.ones((3, 10), np.float32)
    x[1] = -np.inf
    y = softmax.softmax(x, block_r=2)
    assert np.isnan(y[1]).all() and np.allclose(y[[0, 2]], 0.1)


def test_softmax_autotuned_on_the_interpreter():
    x = np.random.default_rng(2).standard_normal((6, 100)).astype(np.float32)
    y = softmax.softmax(x)
    assert softmax.softmax_tuned.best_config == softmax.CONFIGS[0]
    assert rel_error(y, softmax.reference(x)) < TOL["f32"]


# --- layer norm ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,wdtype", [("f16", "f32"), ("bf16", "bf16"), ("f32", "f32"),
                                          ("f16", "f16")])
@pytest.mark.parametrize("R,C,block_r", [(37, 1000, 4), (10, 50, 4), (3, 1, 2)])
def test_layer_norm_rows(dtype, wdtype, R, C, block_r):
    rng = np.random.default_rng(R + C)
    x = array(rng.standard_normal((R, C)) * 3 + 2, dtype)
    w = array(rng.standard_normal(C), wdtype)
    b = array(rng.standard_normal(C), wdtype)
    y, mean, rstd = layer_norm.layer_norm(x, w, b, eps=1e-5, block_r=block_r)
    ref_y, ref_mean, ref_rstd = layer_norm.reference(x, w, b, eps=1e-5)
    assert y.dtype == x.dtype and mean.dtype == rstd.dtype == np.float32
    # y is normalised (|y| of order |w| + |b|): its error is the output's rounding.
    assert rel_error(y, ref_y) < 2 * TOL[dtype]
    assert max_rel_error(mean, ref_mean) < 1e-5
    assert np.abs(rstd - ref_rstd).max() / ref_rstd.max() < 1e-4


def test_layer_norm_autotuned_on_the_interpreter():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 100)).astype(np.float32)
    w, b = rng.standard_normal(100).astype(np.float32), np.zeros(100, np.float32)
    y, _, _ = layer_norm.layer_norm(x, w, b)
    assert layer_norm.layer_norm_tuned.best_config == layer_norm.CONFIGS[0]
    assert rel_error(y, layer_norm.reference(x, w, b)[0]) < TOL["f32"]


@pytest.mark.parametrize("atomic", [False, True], ids=["partials", "atomic"])
@pytest.mark.parametrize("M,N,K,split_k", [(16, 200, 300, 4), (5, 64, 256, 3), (70, 50, 40, 2)])
def test_gemm_split_k(M, N, K, split_k, atomic):
    # K in split_k slices (the last one short), their float32 partials added by a loop, or by
    # tl.atomic_add into one float32 C (blocks past M and N dropped, as a store's).
    rng = np.random.default_rng(M + N + K)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = gemm.matmul_split_k(a, b, split_k=split_k, blocks=(32, 32, 32), atomic=atomic)
    assert c.dtype == np.float16 and rel_error(c, gemm.reference(a, b)) < 2 * TOL["f16"]


@pytest.mark.parametrize("chunk,block_r", [(32, 1), (64, 3), (256, 2)])
def test_layer_norm_in_passes(chunk, block_r):
    # Loops over column chunks carrying partial sums; rows and columns not multiples of the
    # blocks (the last chunk and row block read zeros past the edges).
    rng = np.random.default_rng(chunk)
    x = array(rng.standard_normal((7, 300)) * 3 + 2, "f16")
    w, b = rng.standard_normal(300).astype(np.float32), rng.standard_normal(300).astype(np.float32)
    y, mean, rstd = layer_norm.layer_norm(x, w, b, block_r=block_r, chunk=chunk)
    ref_y, ref_mean, ref_rstd = layer_norm.reference(x, w, b)
    assert rel_error(y, ref_y) < 2 * TOL["f16"] and max_rel_error(mean, ref_mean) < 1e-5
    assert np.abs(rstd - ref_rstd).max() / ref_rstd.max() < 1e-4


def test_wide_rows_take_passes(monkeypatch):
    launched = []
    kernel = layer_norm.layer_norm_chunked_kernel
    monkeypatch.setattr(layer_norm, "WIDE", 64)          # rows of 100: wide here
    monkeypatch.setattr(layer_norm, "layer_norm_chunked_kernel", type(
        "Spy", (), {"__getitem__": lambda self, g: (lambda *a, **k: (launched.append(k),
                                                                     kernel[g](*a, **k)))})())
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 100)).astype(np.float32)
    w, b = np.ones(100, np.float32), np.zeros(100, np.float32)
    y, _, _ = layer_norm.layer_norm(x, w, b)
    assert launched == [dict(BLOCK_R=1, BLOCK_C=2048)]
    assert rel_error(y, layer_norm.reference(x, w, b)[0]) < TOL["f32"]


# --- the element-wise chain ---------------------------------------------------------------------

@pytest.mark.parametrize("xdtype,ydtype,out", [("f16", "f32", "f16"), ("bf16", "bf16", "f32"),
                                               ("f32", "f16", "bf16")])
def test_scale_add_gelu(xdtype, ydtype, out):
    rng = np.random.default_rng(4)
    x = array(rng.standard_normal((13, 77)) * 3, xdtype)
    y = array(rng.standard_normal((13, 77)), ydtype)
    o = elementwise.scale_add_gelu(x, y, 0.75, out_dtype=DTYPES[out], block=256)
    assert o.dtype == DTYPES[out] and o.shape == (13, 77)
    assert rel_error(o, elementwise.reference(x, y, 0.75)) < TOL[out]
    with pytest.raises(ValueError, match="differ in shape"):
        elementwise.scale_add_gelu(x, y[:5], 1.0)


# --- they compile for the GPU -------------------------------------------------------------------

def example_kernels():
    """(name, CompiledKernel) of each example kernel at a typical specialisation, with blocks
    that today's reference lowering fits in shared memory (it keeps every live tile there: a
    128×128 GEMM block with the GELU epilogue needs 448 KiB)."""
    h, f = np.zeros((2, 2), np.float16), np.zeros(2, np.float32)
    b = tessel.to_bf16(np.zeros((2, 2), np.float32))
    yield "gemm", gemm.matmul_kernel.warmup(h, h, h, f, 2, 2, 2, BM=64, BN=64, BK=64,
                                            HAS_BIAS=True, ACTIVATION="gelu_tanh")
    yield "gemm bf16 -> f32", gemm.matmul_kernel.warmup(b, b, f, f, 2, 2, 2, BM=64, BN=64, BK=32,
                                                        HAS_BIAS=False, ACTIVATION="relu")
    yield "softmax", softmax.softmax_kernel.warmup(h, h, 2, 2, BLOCK_R=4, BLOCK_C=1024)
    yield "layer norm", layer_norm.layer_norm_kernel.warmup(b, f, f, b, f, f, 2, 2, 1e-5,
                                                            BLOCK_R=2, BLOCK_C=1024)
    yield "element-wise", elementwise.scale_add_gelu_kernel.warmup(h, f, b, 2, 0.5, BLOCK=1024)


@pytest.mark.parametrize("chip", ["sm_90a", "sm_80"])
def test_the_examples_compile_for_the_gpu(chip, tmp_path, monkeypatch):
    monkeypatch.setenv("TESSEL_CACHE_DIR", str(tmp_path))
    for name, kernel in example_kernels():
        binary = kernel.binary(tessel.GpuOptions(chip=chip, codegen="auto"))
        assert binary.chip == chip and binary.cubin and binary.name == kernel.name, name
        assert f".target {chip}" in binary.ptx, name


@pytest.mark.parametrize("script", ["gemm.py", "softmax.py", "layer_norm.py", "elementwise.py"])
def test_the_examples_run_as_scripts(script):
    r = subprocess.run([sys.executable, str(EXAMPLES / script)], capture_output=True, text=True,
                       timeout=300, cwd=EXAMPLES)
    assert r.returncode == 0, r.stderr
    errors = [float(line.rsplit("float64 ", 1)[1].split()[0])
              for line in r.stdout.splitlines() if "interpreter" in line]
    assert errors and max(errors) < 5e-3, r.stdout
