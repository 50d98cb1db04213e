"""FP8 (e4m3fn) in the DSL on the CPU interpreter: numpy carries it as uint8 bit patterns
(tessel.to_fp8 / from_fp8); tiles of it are loaded, stored, converted and multiplied by tl.dot
with f32 accumulation; conversions to it round to nearest even and saturate at ±448."""
import importlib
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import tessel
import tessel.language as tl
from tessel import attention_fp8 as f8

torch = pytest.importorskip("torch")


def test_to_fp8_matches_torch_bit_for_bit():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(20000) * np.exp(rng.standard_normal(20000) * 3),
                        [0.0, -0.0, 448.0, 464.0, 465.0, 2.0 ** -10, 1.5 * 2.0 ** -9,
                         2.5 * 2.0 ** -9, 1e9, -1e9]]).astype(np.float32)
    ours = tessel.to_fp8(x)
    want = torch.from_numpy(np.clip(x, -448, 448)).to(torch.float8_e4m3fn).view(torch.uint8)
    np.testing.assert_array_equal(ours, want.numpy())
    back = torch.from_numpy(ours).view(torch.float8_e4m3fn).float().numpy()
    np.testing.assert_array_equal(tessel.from_fp8(ours), back)
    assert tessel.to_fp8([np.inf, -np.inf]).tolist() == [0x7E, 0xFE]   # satfinite: ±448
    assert np.isnan(tessel.from_fp8(tessel.to_fp8([np.nan]))).all()


@tessel.jit
def fp8_dot(a, b, out, M: tl.constexpr, K: tl.constexpr, N: tl.constexpr):
    ad = tl.make_desc(a, shape=(M, K), strides=(K, 1))
    bd = tl.make_desc(b, shape=(N, K), strides=(K, 1))
    od = tl.make_desc(out, shape=(M, N), strides=(N, 1))
    at = tl.load(ad, (0, 0), shape=(M, K))
    bt = tl.load(bd, (0, 0), shape=(N, K))
    tl.store(od, (0, 0), tl.dot(at, bt.T))


def test_dot_of_fp8_tiles_accumulates_in_f32():
    rng = np.random.default_rng(1)
    a = tessel.to_fp8(rng.standard_normal((16, 32)) * 4)
    b = tessel.to_fp8(rng.standard_normal((8, 32)))
    out = np.zeros((16, 8), np.float32)
    fp8_dot[(1,)](a, b, out, 16, 32, 8)
    want = tessel.from_fp8(a).astype(np.float64) @ tessel.from_fp8(b).astype(np.float64).T
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-5)


@tessel.jit
def to_fp8_and_back(x, q, out, N: tl.constexpr):
    xd = tl.make_desc(x, shape=(N,), strides=(1,))
    qd = tl.make_desc(q, shape=(N,), strides=(1,))
    od = tl.make_desc(out, shape=(N,), strides=(1,))
    t = tl.load(xd, (0,), shape=(N,)).to(tl.float8_e4m3fn)
    tl.store(qd, (0,), t)
    tl.store(od, (0,), t.to(tl.float16))


def test_conversion_rounds_to_nearest_even_and_saturates():
    x = np.array([0.3, -1.0625, 1.1875, 500.0, -1e6, 2.0 ** -11, 3.0 * 2.0 ** -10, 17.0],
                 np.float32)
    q = np.zeros(8, np.uint8)
    out = np.zeros(8, np.float16)
    to_fp8_and_back[(1,)](x, q, out, 8)
    np.testing.assert_array_equal(q, tessel.to_fp8(x))
    np.testing.assert_array_equal(out, tessel.from_fp8(q).astype(np.float16))
    assert out[3] == 448 and out[4] == -448 and out[2] == 1.25 and out[7] == 16


def test_fp8_arithmetic_is_refused_with_a_location():
    @tessel.jit
    def bad(x, out, N: tl.constexpr):
        xd = tl.make_desc(x, shape=(N,), strides=(1,))
        t = tl.load(xd, (0,), shape=(N,))
        tl.store(tl.make_desc(out, shape=(N,), strides=(1,)), (0,), t * 2)

    with pytest.raises(Exception, match="test_dsl_fp8.py"):
        bad[(1,)](np.zeros(4, np.uint8), np.zeros(4, np.uint8), 4)


def fp8_reference(q8, k8, v8, causal=False, scale=None, dq=1.0, dk=1.0, dv=1.0):
    """float64 attention of the dequantized FP8 inputs: softmax(scale·dq·dk·q·kᵀ)·v·dv."""
    q, k, v = (tessel.from_fp8(x).astype(np.float64) for x in (q8, k8, v8))
    H, Hkv = q.shape[1], k.shape[1]
    k, v = (np.repeat(x, H // Hkv, axis=1) for x in (k, v))
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    dq, dk, dv = (np.broadcast_to(np.asarray(d, np.float64), (q.shape[0], Hkv))
                  .repeat(H // Hkv, axis=1)[..., None, None] for d in (dq, dk, dv))
    s = scale * dq * dk * (q @ np.swapaxes(k, -1, -2))
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - np.where(np.isfinite(m), m, 0))
    l = p.sum(-1, keepdims=True)
    return p / np.where(l > 0, l, 1) @ v * dv, np.log(l[..., 0]) + m[..., 0]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(1, 2, 2, 40, 37, 32), (2, 4, 2, 33, 70, 16),
                                   (1, 2, 1, 24, 50, 256)])
def test_fp8_attention_on_the_interpreter(shape, causal):
    # P is rounded to e4m3 before P·V (FlashAttention-3's FP8 forward): outputs within a few
    # per cent of the largest value, the LSE (computed before that rounding) within f32's.
    B, H, Hkv, Nq, Nk, D = shape
    rng = np.random.default_rng(2)
    q8, k8, v8 = (tessel.to_fp8(rng.standard_normal((B, h, n, D)) * 3)
                  for h, n in ((H, Nq), (Hkv, Nk), (Hkv, Nk)))
    dq, dk = 0.5, rng.uniform(0.5, 2, (B, 1))
    o, lse = tessel.attention(q8, k8, v8, causal=causal, enable_gqa=H != Hkv, return_lse=True,
                              descale_q=dq, descale_k=dk, descale_v=0.25, out_dtype=np.float16)
    want, want_lse = fp8_reference(q8, k8, v8, causal, dq=dq, dk=dk, dv=0.25)
    assert o.dtype == np.float16 and o.shape == (B, H, Nq, D)
    err = np.abs(o.astype(np.float64) - want).max()
    assert err <= 0.04 * np.abs(want).max(), err
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)
    # bf16 by default (FlashAttention-3's FP8 output).
    o16 = tessel.attention(q8, k8, v8, causal=causal, enable_gqa=H != Hkv, descale_q=dq,
                           descale_k=dk, descale_v=0.25)
    assert o16.dtype == np.uint16
    assert np.abs(tessel.from_bf16(o16) - o).max() <= 0.01 * np.abs(want).max()


def test_fp8_whole_key_blocks_take_one_key_loop(monkeypatch):
    # As for 16-bit inputs (attention.even_keys): key lengths that are a multiple of the key
    # block take the kernel without the key-tail mask, with the general kernel's outputs.
    rng = np.random.default_rng(3)
    q8, k8, v8 = (tessel.to_fp8(rng.standard_normal((1, 2, 128, 32)) * 3) for _ in range(3))
    asked = []
    monkeypatch.setattr(f8, "even_keys", lambda *a: asked.append(a) or (a[0] % a[1] == 0))
    o, lse = tessel.attention(q8, k8, v8, return_lse=True, out_dtype=np.float16)
    assert asked[-1][0] == 128 and asked[-1][2]          # 128 keys, allowed: EVEN_N
    monkeypatch.setattr(f8, "even_keys", lambda *a: False)
    o1, lse1 = tessel.attention(q8, k8, v8, return_lse=True, out_dtype=np.float16)
    assert np.array_equal(o, o1) and np.array_equal(lse, lse1)
    want, want_lse = fp8_reference(q8, k8, v8, False)
    assert np.abs(o.astype(np.float64) - want).max() <= 0.04 * np.abs(want).max()


@pytest.mark.parametrize("form", ["numbers", "per batch", "per head", "per batch and head",
                                  "0-d arrays", "mixed"])
def test_fp8_descales_broadcast_as_flash_attention(form):
    # Descales reach the kernel as given (their (batch, kv head) strides, 0 where they
    # broadcast) or folded into the scale when they are numbers: every form FlashAttention-3
    # accepts, against the reference with the same factors.
    B, H, Hkv, N, D = 3, 4, 2, 24, 16
    rng = np.random.default_rng(5)
    q8, k8, v8 = (tessel.to_fp8(rng.standard_normal((B, h, N, D)) * 2) for h in (H, Hkv, Hkv))
    u = lambda *shape: rng.uniform(0.25, 4, shape)           # noqa: E731
    dq, dk, dv = {"numbers": (0.5, 2.0, 0.25), "per batch": (u(B, 1), u(B, 1), u(B, 1)),
                  "per head": (u(Hkv), u(1, Hkv), u(Hkv)),
                  "per batch and head": (u(B, Hkv), u(B, Hkv), u(B, Hkv)),
                  "0-d arrays": (np.array(0.5), np.array(2.0), np.array(0.25)),
                  "mixed": (u(B, Hkv), 0.75, u(B, 1))}[form]
    o, lse = tessel.attention(q8, k8, v8, enable_gqa=True, return_lse=True, descale_q=dq,
                              descale_k=dk, descale_v=dv, out_dtype=np.float16)
    want, want_lse = fp8_reference(q8, k8, v8, False, dq=dq, dk=dk, dv=dv)
    assert np.abs(o.astype(np.float64) - want).max() <= 0.04 * np.abs(want).max()
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)


def test_fp8_attention_refuses_what_it_cannot_do():
    q8 = tessel.to_fp8(np.ones((1, 1, 16, 16)))
    with pytest.raises(TypeError, match="k is not"):
        tessel.attention(q8, np.ones((1, 1, 16, 16), np.float16), q8)
    with pytest.raises(TypeError, match="bfloat16 or float16"):
        tessel.attention(q8, q8, q8, out_dtype=np.float32)
    with pytest.raises(ValueError, match=r"descale_k of shape \(3,\)"):
        tessel.attention(q8, q8, q8, descale_k=np.ones(3))
    x = np.ones((1, 1, 16, 16), np.float16)
    with pytest.raises(TypeError, match="are for FP8 inputs"):
        tessel.attention(x, x, x, descale_q=2.0)


def test_fp8_attention_with_mods_on_the_interpreter():
    # score_mod and mask_mod trace into the FP8 program as into the fp16 one.
    rng = np.random.default_rng(3)
    q8, k8, v8 = (tessel.to_fp8(rng.standard_normal((1, 2, 48, 32))) for _ in range(3))

    def window(b, h, q_idx, kv_idx):
        return q_idx - kv_idx <= 8

    def bias(score, b, h, q_idx, kv_idx):
        return score - 0.1 * h

    o = tessel.attention(q8, k8, v8, causal=True, mask_mod=window, score_mod=bias,
                         out_dtype=np.float16)
    q, k, v = (tessel.from_fp8(x).astype(np.float64) for x in (q8, k8, v8))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(32) - 0.1 * np.arange(2)[None, :, None, None]
    i, j = np.indices((48, 48))
    s = np.where((i >= j) & (i - j <= 8), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = p / p.sum(-1, keepdims=True) @ v
    assert np.abs(o - want).max() <= 0.04 * np.abs(want).max()


@pytest.mark.parametrize("descaled", [False, True], ids=["numbers", "tensors"])
def test_fp8_number_descales_keep_the_key_loop_free_of_the_scale_branch(descaled):
    # descale_q and descale_k given as numbers are folded into qk_scale (QK_DESCALED False): the
    # scores' factor is then the moderate float argument itself, known positive and finite, so
    # the lowering folds it into the exponential's FFMA without the branch on 0 < c < inf that
    # a factor read from memory keeps in the key loop (docs/dev/fp8.md).
    from dsl_helpers import BUILD
    N, D = 1024, 128
    x, o = np.zeros((1, 2, N, D), np.uint8), np.zeros((1, 2, N, D), np.uint16)
    lse, ds, ids = np.zeros((1, 2, N), np.float32), np.ones(1, np.float32), np.zeros(8, np.int32)
    k = f8.fp8_persistent_kernel.warmup(x, x, x, o, lse, ds, ds, ds, 0, 0, 0, 0, 0, 0, 0.1, 1.0,
                                        N, N, 2, 2, 2, ids, ids, D=D, BLOCK_M=128, BLOCK_N=128,
                                        CAUSAL=False, SCORE_MOD=None, MASK_MOD=None,
                                        OUT=tl.bfloat16, QK_DESCALED=descaled)
    lowered = subprocess.run([str(BUILD / "bin" / "tessel-opt"),
                              "--convert-tile-to-mma=chip=sm_90a wgmma=true"],
                             input=k.asm["tile-opt"], capture_output=True, text=True, check=True)
    assert ("arith.cmpf ogt" in lowered.stdout) == descaled


def test_fp8_calls_fold_number_descales(monkeypatch):
    # A call's QK_DESCALED: False where descale_q and descale_k are numbers or None (folded into
    # qk_scale), whatever descale_v is; True where either is an array.
    seen = []

    class Recording:
        def __getitem__(self, grid):
            def launch(*args, **constexprs):
                seen.append(constexprs["QK_DESCALED"])
                return real[grid](*args, **constexprs)
            return launch
    real = f8.fp8_attention_kernel
    monkeypatch.setattr(f8, "fp8_attention_kernel", Recording())
    q8 = tessel.to_fp8(np.ones((1, 1, 16, 16)))
    for dq, dk in ((0.5, None), (np.ones(1), 2.0), (None, None), (0.5, np.ones((1, 1)))):
        tessel.attention(q8, q8, q8, descale_q=dq, descale_k=dk, descale_v=np.ones(1))
    assert seen == [False, True, False, True]


@pytest.mark.parametrize("limit", [7000, 3000], ids=["batches", "head-groups"])
@pytest.mark.parametrize("form", ["per batch and head", "numbers", "per batch", "mixed"])
def test_fp8_past_the_i32_limit_runs_in_chunks(limit, form, monkeypatch):
    # Tensors past the kernels' 32-bit offsets run as fp16 ones do (attention.in_chunks): one
    # call per chunk of batches or of GQA head groups, each with its slice of the descales.
    # The limit is lowered so that small inputs take that path; every (batch, head) runs the
    # same program, so the result equals the one-call result exactly.
    att = importlib.import_module("tessel.attention")
    B, H, Hkv, N, D = 3, 4, 2, 40, 32
    rng = np.random.default_rng(7)
    q8, k8, v8 = (tessel.to_fp8(rng.standard_normal((B, h, N, D))) for h in (H, Hkv, Hkv))
    u = lambda *shape: rng.uniform(0.5, 2, shape)            # noqa: E731
    d = {"per batch and head": (u(B, Hkv), u(B, Hkv), u(B, Hkv)), "numbers": (0.5, 2.0, 0.25),
         "per batch": (u(B, 1), u(B, 1), u(B, 1)), "mixed": (u(Hkv), 1.5, u(B, Hkv))}[form]
    kw = dict(causal=True, enable_gqa=True, return_lse=True, descale_q=d[0], descale_k=d[1],
              descale_v=d[2], out_dtype=np.float16)
    want, want_lse = tessel.attention(q8, k8, v8, **kw)
    monkeypatch.setattr(att, "I32_ELEMENTS", limit)
    calls = []
    real = f8.attention
    monkeypatch.setattr(f8, "attention", lambda *a: calls.append(a[0].shape) or real(*a))
    got, lse = tessel.attention(q8, k8, v8, **kw)
    assert np.array_equal(got, want) and np.array_equal(lse, want_lse)
    # A batch spans 5120 elements of q (limit 7000: one batch a call); a GQA group 2560
    # (limit 3000: one group of one batch a call), after the first call that splits.
    assert calls[1:] == ([(1, 4, 40, 32)] * 3 if limit == 7000 else [(1, 2, 40, 32)] * 6), calls
    with pytest.raises(ValueError, match="32-bit offsets"):
        tessel.attention(q8, k8, v8, mask_mod=lambda b, h, qi, ki: qi >= ki, **kw)


def test_the_fp8_example_runs():
    # examples/python/fp8_inference.py on the interpreter: within the recipe's error of its
    # dequantized inputs, and the quantization's on top against the unquantized ones.
    examples = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"
    r = subprocess.run([sys.executable, "fp8_inference.py"], capture_output=True, text=True,
                       timeout=300, cwd=examples)
    assert r.returncode == 0, r.stderr
    errors = [float(line.rsplit("= ", 1)[1]) for line in r.stdout.splitlines()]
    assert len(errors) == 2 and errors[0] < 0.04 and errors[1] < 0.1, r.stdout


@pytest.mark.parametrize("D", [128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_fp8_overlap_compiles(tmp_path, monkeypatch, D, causal):
    # GpuOptions(fp8_overlap) (grid.FP8_OVERLAP_GPU; off until measured): the FP8 kernels'
    # consumers overlapped as fp16's are — a wait with one group in flight, which the
    # synchronous default has none of — V read transposed by the P·V, no spill; d128's
    # persistent kernel, d256's one program a tile (128x64: K and V blocks of other shapes).
    from tessel import cache, grid
    try:
        cache.ptxas_version()
    except tessel.CompilationError as e:
        pytest.skip(str(e))
    N = 1024
    x = np.zeros((1, 2, N, D), np.uint8)
    o = np.zeros((1, 2, N, D), np.uint16)
    lse = np.zeros((1, 2, N), np.float32)
    ds = (np.ones(1, np.float32),) * 3 + (0,) * 6 + (0.1, 1.0)
    ids = np.zeros(8, np.int32)
    BM, BN = f8.FP8_BLOCKS[D]
    cx = dict(D=D, BLOCK_M=BM, BLOCK_N=BN, CAUSAL=causal, SCORE_MOD=None, MASK_MOD=None,
              OUT=tl.bfloat16)
    k = (f8.fp8_persistent_kernel.warmup(x, x, x, o, lse, *ds, N, N, 2, 2, 2, ids, ids, **cx)
         if D == 128 else f8.fp8_attention_kernel.warmup(x, x, x, o, lse, *ds, N, N, 2, 2, **cx))
    sync, over = (cache.get_binary(k, cache.GpuOptions(chip="sm_90a", fp8_overlap=on),
                                   directory=str(tmp_path)) for on in (False, True))
    assert "wgmma.wait_group.sync.aligned 1;" not in sync.ptx
    assert "wgmma.wait_group.sync.aligned 1;" in over.ptx
    assert over.manifest["spill_bytes"] == 0 and over.manifest["given_up"] == []
    assert f8.persistent_kernel(N, N, 128, causal).options.fp8_overlap is None
    monkeypatch.setattr(grid, "FP8_OVERLAP_GPU", True)
    assert f8.persistent_kernel(N, N, 128, causal).options.gpu_options().fp8_overlap
