"""Layouts tessel.attention reads in place on CUDA (layouts.row_layout): the kernel's layout
constexprs on the interpreter against float64, and which torch layouts are read in place and
which are copied (CPU tensors: the check reads strides and addresses only).
test/gpu/test_python_gpu.py runs the same layouts on the GPU."""
import math

import numpy as np
import pytest

from dsl_helpers import BUILD  # noqa: F401 (puts the build's package on the path)
import tessel  # noqa: F401
from tessel.attention import attention_kernel
from tessel.layouts import lean_layout, row_layout


def reference(q, k, v, causal):
    """float64 attention of [B, H, N, D] arrays; k/v heads repeated for GQA."""
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat(rep, axis=1).astype(np.float64), v.repeat(rep, axis=1).astype(np.float64)
    s = q.astype(np.float64) @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_rows_layout_on_the_interpreter(causal):
    # q as [B, N, H, D], k and v from one packed [B, N, 2, Hkv, D] buffer (k's rows 2·Hkv·D
    # apart), the output as [B, N, H, D]; 100 tokens, blocks of 32, GQA.
    B, N, H, Hkv, D = 2, 100, 4, 2, 32
    rng = np.random.default_rng(1 + causal)
    q = rng.standard_normal((B, N, H, D)).astype(np.float32)
    kv = rng.standard_normal((B, N, 2, Hkv, D)).astype(np.float32)
    v = np.ascontiguousarray(kv[:, :, 1])
    o = np.full((B, N, H, D), np.nan, np.float32)
    lse = np.zeros((B, H, N), np.float32)
    attention_kernel[(-(-N // 32), B * H)](
        q, kv, v, o, lse, N, N, H, Hkv, 1 / math.sqrt(D), D=D, BLOCK_M=32, BLOCK_N=32,
        CAUSAL=causal, SCORE_MOD=None, MASK_MOD=None, Q_RS=H * D, Q_HS=D, K_RS=2 * Hkv * D,
        K_HS=D, V_RS=Hkv * D, V_HS=D, O_RS=H * D, O_HS=D)
    t = lambda x: x.transpose(0, 2, 1, 3)  # noqa: E731
    want = reference(t(q), t(kv[:, :, 0]), t(kv[:, :, 1]), causal)
    assert np.abs(t(o) - want).max() < 1e-5


def test_which_layouts_are_read_in_place():
    torch = pytest.importorskip("torch")
    B, N, H, D = 2, 64, 4, 64
    bshd = torch.zeros(B, N, H, D, dtype=torch.float16).transpose(1, 2)
    assert row_layout(torch.zeros(B, H, N, D, dtype=torch.float16)) == (0, 0)
    assert row_layout(bshd) == (H * D, D)
    qkv = torch.zeros(B, N, 3, H, D, dtype=torch.float16)
    assert row_layout(qkv[:, :, 1].transpose(1, 2)) == (3 * H * D, D)
    assert row_layout(bshd[:1]) == (H * D, D)                 # one batch: any batch stride
    # Copied: the head dim not contiguous; batches that do not follow each other's rows; rows
    # not whole 16-byte chunks; an address not 16-byte aligned; one token.
    assert row_layout(torch.zeros(B, H, D, N, dtype=torch.float16).transpose(2, 3)) is None
    assert row_layout(torch.zeros(N, B, H, D, dtype=torch.float16).permute(1, 2, 0, 3)) is None
    assert row_layout(torch.zeros(B, N, H, D + 4, dtype=torch.float16)[..., :D]
                       .transpose(1, 2)) is None
    assert row_layout(torch.zeros(B, N, H * D + 4, dtype=torch.float16)[..., 4:]
                       .view(B, N, H, D).transpose(1, 2)) is None
    assert row_layout(torch.zeros(B, 1, H, D, dtype=torch.float16).transpose(1, 2)) == (0, 0)
    # A contiguous view that starts mid-chunk: copied to an aligned buffer (its 16-byte row
    # copies would fault), as is a strided one.
    from tessel.layouts import contiguous_aligned
    flat = torch.zeros(B * H * N * D + 8, dtype=torch.float16)
    odd = flat[1:1 + B * H * N * D].view(B, H, N, D)
    assert odd.is_contiguous() and odd.data_ptr() % 16
    assert row_layout(odd) is None
    fixed = contiguous_aligned(odd)
    assert fixed.is_contiguous() and fixed.data_ptr() % 16 == 0 and torch.equal(fixed, odd)
    assert contiguous_aligned(bshd).is_contiguous()
    # Every tensor read in place: the constexprs, the output as [B, N, H, D] behind q.
    lay = lean_layout(bshd, bshd, bshd)
    assert lay == (H * D, D) * 4
    contiguous = torch.zeros(B, H, N, D, dtype=torch.float16)
    assert lean_layout(contiguous, bshd, bshd) == (0, 0) + (H * D, D) * 2 + (0, 0)
    assert lean_layout(bshd, torch.zeros(B, H, D, N, dtype=torch.float16).transpose(2, 3),
                        bshd) is None


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_backward_programs_read_rows_in_place(causal):
    # The fast backward's programs (Δ, dQ, key-rows dK/dV) on [B, N, H, D] buffers with the
    # layout constexprs give what they give on contiguous [B, H, N, D] copies, exactly.
    from tessel import backward as bw
    from tessel.grid import fold_grid
    B, N, H, Hkv, D, BM = 2, 70, 4, 2, 32, 32
    rng = np.random.default_rng(3 + causal)
    bshd = {n: rng.standard_normal((B, N, h, D)).astype(np.float32)
            for n, h in (("q", H), ("k", Hkv), ("v", Hkv), ("o", H), ("do", H))}
    bhsd = {n: np.ascontiguousarray(x.transpose(0, 2, 1, 3)) for n, x in bshd.items()}
    lse = rng.standard_normal((B, H, N)).astype(np.float32) + 4
    zeros = np.zeros((B, H, N), np.float32)
    rows = {f"{n.upper()}_RS": x.shape[2] * D for n, x in bshd.items()}
    heads = {f"{n.upper()}_HS": D for n in bshd}
    lay = {**rows, **heads}
    pick = lambda *names: {k: v for k, v in lay.items() if k.split("_")[0] in names}  # noqa

    def run(t, strided):
        delta = np.zeros((B, H, N), np.float32)
        bw.attention_bwd_delta[fold_grid(-(-N // BM), B * H)](
            t["o"], t["do"], zeros, delta, N, H, D=D, BLOCK_M=BM,
            **(pick("O", "DO") if strided else {}))
        cx = dict(D=D, BLOCK_M=BM, BLOCK_N=BM, CAUSAL=causal, SCORE_MOD=None, MASK_MOD=None,
                  **(pick("Q", "K", "V", "DO") if strided else {}))
        dq = np.zeros((B, H, N, D), np.float32)
        dk, dv = (np.zeros((B, H, N, D), np.float32) for _ in range(2))
        bw.attention_bwd_dq[fold_grid(-(-N // BM), B * H)](
            t["q"], t["k"], t["v"], t["do"], lse, delta, dq, N, N, H, Hkv, 0.2, **cx)
        bw.attention_bwd_dkdv_keyrows[fold_grid(-(-N // BM), B * H)](
            t["q"], t["k"], t["v"], t["do"], lse, delta, dk, dv, np.zeros(1, np.float32), N, N, H,
            Hkv, H, 0.2, **cx)
        return delta, dq, dk, dv

    for got, want in zip(run(bshd, True), run(bhsd, False)):
        assert np.array_equal(got, want)
