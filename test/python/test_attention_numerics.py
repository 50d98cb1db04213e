"""Attention on the CPU interpreter against a float64 numpy reference.

Each case runs the naive kernel (softmax streamed across the key loop: the interpreter's
three-pass meaning) and the same kernel after `tile-optimize` (online softmax, scale folding,
split masked loops). Both must match float64 attention with SDPA semantics: rel. error < 1e-5
with f32 inputs, < 1e-2 with bf16 inputs; fully masked rows give 0 and lse = -inf, never NaN.
"""
import pathlib
import subprocess

import numpy as np
import pytest

from attention_kernels import (from_bf16_bits, naive_attention_kernel, reference_attention,
                               to_bf16_bits)

BLOCK_M, BLOCK_N, HEAD_DIM = 16, 16, 32




def run_attention(tools, tmp_path, kernel_text, dtype, q, k, v, scale, window, optimize):
    path = tmp_path / "attention.mlir"
    path.write_text(kernel_text)
    if optimize:
        opt = subprocess.run([str(tools / "tessel-opt"), str(path), "--tile-optimize"],
                             capture_output=True, text=True, timeout=120)
        assert opt.returncode == 0, opt.stderr
        path = tmp_path / "attention.opt.mlir"
        path.write_text(opt.stdout)
    B, H, Nq, D = q.shape
    Hkv, Nk = k.shape[1], k.shape[2]
    args = []
    for name, x in (("q", q), ("k", k), ("v", v)):
        f = tmp_path / f"{name}.npy"
        np.save(f, to_bf16_bits(x).ravel() if dtype == "bf16" else x.astype(np.float32).ravel())
        args.append(f"--arg={f}")
    args += [f"--arg=zeros:{q.size}", f"--arg=zeros:{B * H * Nq}"]
    args += [f"--arg={Nq}", f"--arg={Nk}", f"--arg={H}", f"--arg={Hkv}", f"--arg={float(scale)!r}",
             f"--arg={window}"]
    o_path, lse_path = tmp_path / "o.npy", tmp_path / "lse.npy"
    grid = f"{(Nq + BLOCK_M - 1) // BLOCK_M},{B * H}"
    r = subprocess.run([str(tools / "tessel-run"), str(path), "--kernel=attention", f"--grid={grid}",
                        *args, f"--out=3:{o_path}", f"--out=4:{lse_path}"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    o = np.load(o_path)
    o = from_bf16_bits(o) if dtype == "bf16" else o
    return o.reshape(q.shape).astype(np.float64), np.load(lse_path).reshape(B, H, Nq)


def make_inputs(dtype, B, H, Hkv, Nq, Nk, seed):
    rng = np.random.default_rng(seed)
    shape_q, shape_kv = (B, H, Nq, HEAD_DIM), (B, Hkv, Nk, HEAD_DIM)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in (shape_q, shape_kv, shape_kv))
    if dtype == "bf16":  # the reference sees exactly the values the kernel sees
        q, k, v = (from_bf16_bits(to_bf16_bits(x)) for x in (q, k, v))
    return q, k, v


def check(o, lse, ref_o, ref_lse, tol):
    assert not np.isnan(o).any() and not np.isnan(lse).any()
    rel = np.abs(o - ref_o).max() / max(np.abs(ref_o).max(), 1e-30)
    assert rel < tol, f"relative error {rel:.3e} >= {tol}"
    masked = np.isneginf(ref_lse)
    assert np.array_equal(np.isneginf(lse), masked)
    assert (o[masked] == 0).all()
    finite = ~masked
    if finite.any():
        assert np.abs(lse[finite] - ref_lse[finite]).max() < 10 * tol * max(1.0, np.abs(ref_lse[finite]).max())


CASES = [(dtype, mask, nk)
         for dtype in ("f32", "bf16")
         for mask in ("none", "causal", "window", "prefix")
         for nk in (1, 17, 128, 1000)]


@pytest.mark.parametrize("optimize", [False, True], ids=["naive", "tile-optimize"])
@pytest.mark.parametrize("dtype,mask,nk", CASES)
def test_attention_matches_float64(tools, tmp_path, dtype, mask, nk, optimize):
    # Grouped-query 2:1, 2 batches, a query length that is not a multiple of the block.
    B, H, Hkv, Nq = 2, 2, 1, 21
    window = 24
    q, k, v = make_inputs(dtype, B, H, Hkv, Nq, nk, seed=nk)
    scale = 1.0 / np.sqrt(HEAD_DIM)
    kernel = naive_attention_kernel(dtype, mask, BLOCK_M, BLOCK_N, HEAD_DIM)
    o, lse = run_attention(tools, tmp_path, kernel, dtype, q, k, v, scale, window, optimize)
    ref_o, ref_lse = reference_attention(q, k, v, scale, mask, window)
    check(o, lse, ref_o, ref_lse, 1e-5 if dtype == "f32" else 1e-2)


@pytest.mark.parametrize("optimize", [False, True], ids=["naive", "tile-optimize"])
def test_fully_masked_rows_give_zero(tools, tmp_path, optimize):
    # A window of 0 keys hides every key from every query: all rows fully masked.
    q, k, v = make_inputs("f32", 1, 2, 2, 19, 40, seed=3)
    kernel = naive_attention_kernel("f32", "window", BLOCK_M, BLOCK_N, HEAD_DIM)
    o, lse = run_attention(tools, tmp_path, kernel, "f32", q, k, v, 0.5, 0, optimize)
    assert (o == 0).all()
    assert np.isneginf(lse).all()


@pytest.mark.parametrize("optimize", [False, True], ids=["naive", "tile-optimize"])
def test_multi_head_attention_without_grouping(tools, tmp_path, optimize):
    q, k, v = make_inputs("f32", 1, 3, 3, 40, 50, seed=5)
    kernel = naive_attention_kernel("f32", "causal", BLOCK_M, BLOCK_N, HEAD_DIM)
    o, lse = run_attention(tools, tmp_path, kernel, "f32", q, k, v, 0.3, 0, optimize)
    ref_o, ref_lse = reference_attention(q, k, v, 0.3, "causal")
    check(o, lse, ref_o, ref_lse, 1e-5)


@pytest.mark.parametrize("example", ["attention_naive.mlir", "attention_streamed.mlir"])
def test_bundled_examples_match_float64(tools, tmp_path, example):
    """The naive example and its hand-written streamed twin (f16, causal, 64x64 blocks, GQA)."""
    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / example
    B, H, HKV, N, D = 1, 4, 2, 150, 64
    rng = np.random.default_rng(11)
    q = rng.standard_normal((B, H, N, D)).astype(np.float16)
    k = rng.standard_normal((B, HKV, N, D)).astype(np.float16)
    v = rng.standard_normal((B, HKV, N, D)).astype(np.float16)
    for name, x in (("q", q), ("k", k), ("v", v)):
        np.save(tmp_path / f"{name}.npy", x.ravel())
    r = subprocess.run([str(tools / "tessel-run"), str(path), "--kernel=attention", "--grid=3,4",
                        *[f"--arg={tmp_path / n}.npy" for n in "qkv"], f"--arg=zeros:{q.size}",
                        f"--arg=zeros:{B * H * N}", f"--arg={N}", f"--arg={N}", f"--arg={H}",
                        f"--arg={HKV}", "--arg=0.125", f"--out=3:{tmp_path / 'o.npy'}",
                        f"--out=4:{tmp_path / 'lse.npy'}"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    o = np.load(tmp_path / "o.npy").reshape(q.shape).astype(np.float64)
    lse = np.load(tmp_path / "lse.npy").reshape(B, H, N)
    ref_o, ref_lse = reference_attention(q, k, v, 0.125, "causal")
    check(o, lse, ref_o, ref_lse, 5e-3)
