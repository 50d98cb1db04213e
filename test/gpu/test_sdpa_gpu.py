"""tessel.scaled_dot_product_attention on the GPU against torch's SDPA in float32 on fresh random
inputs: boolean masks (a document mask: block-sparse through its block mask), float biases,
causal, GQA, gradients.

    TESSEL_CACHE_DIR=$(mktemp -d) python3 -m pytest -q test/gpu/test_sdpa_gpu.py
"""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tessel  # noqa: E402
from grad_check import assert_within_twice_torch  # noqa: E402

F = torch.nn.functional


def _rand(*shape, dtype, seed, grad=False):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, device="cuda", dtype=dtype, generator=g).requires_grad_(grad)


def _masks(L, S):
    doc = torch.arange(L, device="cuda") * 5 // L
    docs = torch.arange(S, device="cuda") * 5 // S
    return {
        "none": None,
        "document": doc[:, None] == docs[None, :],
        "bias per head": _rand(1, 8, L, S, dtype=torch.float32, seed=9),
        "padding": (torch.arange(S, device="cuda") < S - 100)[None, None, None, :],
    }


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mask", ["none", "document", "bias per head", "padding"])
@pytest.mark.parametrize("D", [64, 128])
def test_sdpa_against_torch(dtype, mask, D):
    L = S = 1000
    q = _rand(2, 8, L, D, dtype=dtype, seed=1, grad=True)
    k, v = (_rand(2, 4, S, D, dtype=dtype, seed=s, grad=True) for s in (2, 3))
    m = _masks(L, S)[mask]
    if m is not None and m.is_floating_point():
        m = m.to(dtype)
    o = tessel.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True)
    g = _rand(*o.shape, dtype=torch.float64, seed=7)
    got = torch.autograd.grad((o.double() * g).sum(), (q, k, v))
    runs = {}
    for prec in (torch.float64, dtype):         # the reference, and torch in the input dtype
        xs = tuple(x.detach().to(prec).requires_grad_() for x in (q, k, v))
        mp = m.to(prec) if m is not None and m.is_floating_point() else m
        r = F.scaled_dot_product_attention(*xs, attn_mask=mp, enable_gqa=True)
        runs[prec] = (r, torch.autograd.grad((r.double() * g).sum(), xs))
    (want_o, want), (low_o, low) = runs[torch.float64], runs[dtype]
    assert_within_twice_torch((o,), (want_o,), (low_o,), names=("o",))
    assert_within_twice_torch(got, want, low)


def test_patch_sdpa_on_cuda():
    # nn.MultiheadAttention and a causal SDPA call inside tessel.patch_sdpa run tessel's kernels
    # (counted) within FlashAttention's rule of float64; dropout goes to torch's SDPA.
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(1024, 8, batch_first=True, device="cuda",
                                      dtype=torch.float16)
    x = torch.randn(2, 512, 1024, device="cuda", dtype=torch.float16)
    q, k, v = (torch.randn(2, 8, 512, 128, device="cuda", dtype=torch.float16)
               for _ in range(3))
    F = torch.nn.functional
    with tessel.patch_sdpa() as p:
        got = [mha(x, x, x, need_weights=False)[0], F.scaled_dot_product_attention(
            q, k, v, is_causal=True)]
        with pytest.warns(UserWarning, match="dropout_p"):
            F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert p.tessel_calls == 2 and p.reasons == {"dropout_p > 0": 1}
    x64 = x.double()
    want = [mha.double()(x64, x64, x64, need_weights=False)[0],
            F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)]
    mha.half()
    lowp = [mha(x, x, x, need_weights=False)[0], F.scaled_dot_product_attention(
        q, k, v, is_causal=True)]
    for g, w, lo in zip(got, want, lowp):
        err, ref_err = ((a.double() - w).abs().max().item() for a in (g, lo))
        assert err <= 2 * ref_err + 1e-3, (err, ref_err)
