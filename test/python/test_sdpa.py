"""tessel.scaled_dot_product_attention (python/tessel/sdpa.py) against torch's SDPA in float64
on fresh random inputs: ranks 3-5, boolean and float attn_mask of every broadcast shape, GQA,
causal, scale, v of its own head dim, gradients; and SDPA's refusals. torch CPU tensors (the
interpreter)."""
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import dsl_helpers  # noqa: F401,E402 (puts the build's package on the path)
import tessel  # noqa: E402


def _rand(*shape, seed, dtype=torch.float32, grad=False):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype).requires_grad_(grad)


def _check(q, k, v, tol=2e-5, **kw):
    """Output and gradients against SDPA on float64 copies of the same inputs."""
    o = tessel.scaled_dot_product_attention(q, k, v, **kw)
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    mask = kw.pop("attn_mask", None)
    if mask is not None and mask.is_floating_point():
        mask = mask.double()
    r = F.scaled_dot_product_attention(q64, k64, v64, attn_mask=mask, **kw)
    assert o.shape == r.shape and o.dtype == q.dtype
    torch.testing.assert_close(o.double(), r, atol=tol, rtol=tol)
    if q.requires_grad:
        g = _rand(*o.shape, seed=99)
        got = torch.autograd.grad((o.double() * g.double()).sum(), (q, k, v))
        want = torch.autograd.grad((r * g.double()).sum(), (q64, k64, v64))
        for a, b in zip(got, want):
            torch.testing.assert_close(a.double(), b, atol=10 * tol, rtol=10 * tol)


MASKS = {
    "none": None,
    "bool 2d": (lambda L, S: _rand(L, S, seed=5) > -0.5),
    "bool per head": (lambda L, S: _rand(1, 3, 1, S, seed=6) > 0),
    "float per batch": (lambda L, S: _rand(2, 1, L, S, seed=7)),
    "float full": (lambda L, S: _rand(2, 3, L, S, seed=8)),
    "float -inf": (lambda L, S: torch.where(_rand(L, S, seed=9) > 0.3, float("-inf"), 0.0)),
}


@pytest.mark.parametrize("mask", MASKS)
def test_masks_and_gradients(mask):
    L, S = 37, 29
    q, k = _rand(2, 3, L, 16, seed=1, grad=True), _rand(2, 3, S, 16, seed=2, grad=True)
    v = _rand(2, 3, S, 16, seed=3, grad=True)
    m = MASKS[mask]
    attn_mask = None if m is None else m(L, S)
    if mask == "float -inf":                # keep every row some key (SDPA gives NaN rows)
        attn_mask[:, 0] = 0.0
    _check(q, k, v, attn_mask=attn_mask)


@pytest.mark.parametrize("shape", [(3, 20, 16), (2, 3, 20, 16), (2, 2, 3, 20, 16)])
def test_ranks(shape):
    q, k, v = (_rand(*shape, seed=s, grad=True) for s in range(3))
    mask = _rand(*shape[:-2], 20, 20, seed=4) > -0.8
    _check(q, k, v, attn_mask=mask)
    _check(q, k, v, is_causal=True)


def test_gqa_causal_scale_and_value_dim():
    q = _rand(1, 4, 24, 32, seed=1, grad=True)
    k, v = _rand(1, 2, 24, 32, seed=2, grad=True), _rand(1, 2, 24, 16, seed=3, grad=True)
    _check(q, k, v, is_causal=True, scale=0.3, enable_gqa=True)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision(dtype):
    q, k, v = (_rand(1, 2, 40, 32, seed=s, dtype=dtype) for s in range(3))
    mask = _rand(40, 40, seed=4).to(dtype)
    _check(q, k, v, tol=3e-3 if dtype == torch.float16 else 2e-2, attn_mask=mask)


def test_refusals():
    q = _rand(1, 2, 8, 16, seed=1)
    sdpa = tessel.scaled_dot_product_attention
    with pytest.raises(NotImplementedError, match="dropout"):
        sdpa(q, q, q, dropout_p=0.1)
    with pytest.raises(ValueError, match="is_causal"):
        sdpa(q, q, q, attn_mask=torch.ones(8, 8, dtype=torch.bool), is_causal=True)
    with pytest.raises(ValueError, match="broadcast"):
        sdpa(q, q, q, attn_mask=torch.ones(7, 8, dtype=torch.bool))
    with pytest.raises(TypeError, match="bool or floating"):
        sdpa(q, q, q, attn_mask=torch.ones(8, 8, dtype=torch.int32))
    with pytest.raises(NotImplementedError, match="requires grad"):
        sdpa(q, q, q, attn_mask=torch.zeros(8, 8, requires_grad=True))
    with pytest.raises(TypeError, match="torch tensor"):
        sdpa(q.numpy(), q, q)
    with pytest.raises(ValueError, match="rank"):
        sdpa(q, q[0], q[0])


class _Block(torch.nn.Module):
    """A model's attention the way Hugging Face's "sdpa" layers call it."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(16, 48)

    def forward(self, x, mask=None, dropout=0.0):
        q, k, v = self.proj(x).view(x.shape[0], x.shape[1], 3, 2, 8).permute(2, 0, 3, 1, 4)
        return torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=mask is None)


def test_patch_sdpa_routes_torch_calls_to_tessel(monkeypatch):
    # Code calling torch's SDPA, unchanged, runs tessel inside the patch (tessel's own entry
    # seen called), with torch's results and gradients; nn.MultiheadAttention too.
    torch.manual_seed(0)
    block = _Block()
    x = torch.randn(2, 12, 16)
    mask = torch.rand(12, 12) > 0.3
    mask[:, 0] = True
    original = torch.nn.functional.scaled_dot_product_attention
    want = [block(x), block(x, mask)]
    want_grad = torch.autograd.grad(want[0].sum(), block.proj.weight)[0]
    called = []
    run = tessel.sdpa.scaled_dot_product_attention
    monkeypatch.setattr(tessel.sdpa, "scaled_dot_product_attention",
                        lambda *a: called.append(1) or run(*a))
    mha = torch.nn.MultiheadAttention(16, 2, batch_first=True)
    mha_want = mha(x, x, x, need_weights=False)[0]
    with tessel.patch_sdpa() as p:
        assert torch.nn.functional.scaled_dot_product_attention is not original
        got = [block(x), block(x, mask)]
        got_grad = torch.autograd.grad(got[0].sum(), block.proj.weight)[0]
        mha_got = mha(x, x, x, need_weights=False)[0]
    assert torch.nn.functional.scaled_dot_product_attention is original
    for a, b in zip(got + [got_grad, mha_got], want + [want_grad, mha_want]):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=2e-5)
    assert p.tessel_calls == len(called) == 3 and p.torch_calls == 0


def test_patch_sdpa_hands_what_tessel_does_not_take_to_torch():
    # Attention dropout (a model in training mode) and float64 run torch's SDPA, counted and
    # warned once a reason; patches nest and the last one out restores torch's function.
    block = _Block()
    x = torch.randn(2, 12, 16)
    original = torch.nn.functional.scaled_dot_product_attention
    with tessel.patch_sdpa() as outer:
        with tessel.patch_sdpa() as p:
            with pytest.warns(UserWarning, match="dropout_p > 0: this call runs torch's own"):
                block(x, dropout=0.1)
            block(x, dropout=0.1)
            block.double()(x.double())
        assert torch.nn.functional.scaled_dot_product_attention is not original
        block.float()(x)
    assert torch.nn.functional.scaled_dot_product_attention is original
    assert p.reasons == {"dropout_p > 0": 2, "torch.float64 inputs": 1}
    assert p.tessel_calls == 0 and outer.tessel_calls == 1


def test_patch_sdpa_under_torch_compile():
    # A function compiled inside the patch holds tessel's op in its one graph (fullgraph).
    F = torch.nn.functional
    q, k, v = (torch.randn(1, 2, 16, 16) for _ in range(3))

    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    want = f(q, k, v)
    seen = []

    def backend(gm, example_inputs):
        seen.append([n.target for n in gm.graph.nodes if n.op == "call_function"])
        return gm
    torch._dynamo.reset()
    with tessel.patch_sdpa() as p:
        got = torch.compile(f, backend=backend, fullgraph=True)(q, k, v)
    torch.testing.assert_close(got, want, atol=2e-6, rtol=2e-6)
    assert p.tessel_calls == 1 and len(seen) == 1
    assert torch.ops.tessel.sdpa_forward.default in seen[0]
