"""tessel.flex_attention on the GPU (python/tessel/flex.py): FlexAttention's call with its own
create_block_mask and mods written with torch functions, against float32 attention on fresh
random inputs (FlexAttention's accuracy rule: within twice the error of the same computation in
the input dtype, plus a floor), forward and gradients, eager and under torch.compile (inductor,
fullgraph: equal bits to eager).

    TESSEL_CACHE_DIR=$(mktemp -d) python3 -m pytest -q test/gpu/test_flex_gpu.py
"""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
fa = pytest.importorskip("torch.nn.attention.flex_attention")

import tessel  # noqa: E402

from mask_cases import document_ids  # noqa: E402


def _softcap(score, b, h, q_idx, kv_idx):
    return 20.0 * torch.tanh(score / 20.0)


def _causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def _reference(q, k, v, score_mod, keep, dtype):
    """Attention on the dense score matrix in `dtype` (mods applied elementwise)."""
    q, k, v = (x.detach().to(dtype).requires_grad_() for x in (q, k, v))
    rep = q.shape[1] // k.shape[1]
    s = q @ k.repeat_interleave(rep, 1).transpose(-1, -2) * q.shape[-1] ** -0.5
    B, H, L, S = s.shape
    b, h, i, j = (torch.arange(n, device="cuda").view(*[-1 if d == a else 1 for a in range(4)])
                  for d, n in enumerate((B, H, L, S)))
    if score_mod is not None:
        s = score_mod(s, b, h, i, j)
    if keep is not None:
        s = s.masked_fill(~keep(b, h, i, j), float("-inf"))
    return torch.softmax(s.float(), -1).to(dtype) @ v.repeat_interleave(rep, 1), (q, k, v)


def _check(ours, q, k, v, score_mod, keep):
    g = torch.randn(ours.shape, device="cuda", dtype=ours.dtype,
                    generator=torch.Generator(device="cuda").manual_seed(5))
    grads = torch.autograd.grad(ours, (q, k, v), g)
    ref32, ins32 = _reference(q, k, v, score_mod, keep, torch.float32)
    low, ins_low = _reference(q, k, v, score_mod, keep, q.dtype)
    g32 = torch.autograd.grad(ref32, ins32, g.float())
    glow = torch.autograd.grad(low, ins_low, g)
    for a, r, l in zip([ours, *grads], [ref32, *g32], [low, *glow]):
        bound = 2 * (l.float() - r).abs().max().item() + 1e-3
        assert (a.float() - r).abs().max().item() <= bound


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("case", ["causal_softcap", "document", "gqa"])
def test_flex_drop_in(dtype, case):
    B, H, N, D = 2, 4, 1000, 128
    gen = torch.Generator(device="cuda").manual_seed(1)
    Hkv = 2 if case == "gqa" else H
    q = torch.randn(B, H, N, D, device="cuda", dtype=dtype, generator=gen).requires_grad_()
    k, v = (torch.randn(B, Hkv, N, D, device="cuda", dtype=dtype, generator=gen)
            .requires_grad_() for _ in range(2))
    score_mod, keep = (_softcap, _causal) if case != "document" else (None, None)
    if case == "document":
        doc = document_ids(torch, B, N, gen)

        def keep(b, h, q_idx, kv_idx):
            return (doc[b, q_idx] == doc[b, kv_idx]) & (q_idx >= kv_idx)
    bm = fa.create_block_mask(keep, B if case == "document" else None, None, N, N,
                              device="cuda")
    o = tessel.flex_attention(q, k, v, score_mod=score_mod, block_mask=bm,
                              enable_gqa=case == "gqa")
    _check(o, q, k, v, score_mod, keep)


def test_flex_drop_in_inductor_fullgraph():
    B, H, N, D = 2, 8, 2048, 128
    gen = torch.Generator(device="cuda").manual_seed(2)
    doc = document_ids(torch, B, N, gen)

    def keep(b, h, q_idx, kv_idx):
        return (doc[b, q_idx] == doc[b, kv_idx]) & (q_idx >= kv_idx)
    bm = fa.create_block_mask(keep, B, None, N, N, device="cuda")
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16, generator=gen)
               .requires_grad_() for _ in range(3))

    def f(q, k, v):
        return tessel.flex_attention(q, k, v, score_mod=_softcap, block_mask=bm)

    torch._dynamo.reset()
    outs = []
    for fn in (torch.compile(f, fullgraph=True), f):
        o = fn(q, k, v)
        outs.append([o, *torch.autograd.grad(o.float().sum(), (q, k, v))])
    for a, b in zip(*outs):
        torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_the_drop_in_example_on_cuda():
    # examples/python/flex_drop_in.py --cuda --compile checks itself against float64.
    import os
    import pathlib
    import subprocess
    import sys
    root = pathlib.Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, str(root / "examples" / "python" / "flex_drop_in.py"),
                        "--cuda", "--compile"], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("max error vs float64") == 8     # two steps, other documents
