"""tessel.flex_attention (python/tessel/flex.py): FlexAttention's call with FlexAttention's own
BlockMask and mods written with torch functions, against torch's flex_attention and float64,
eager and under torch.compile; torch CPU tensors on the interpreter."""
import pytest

torch = pytest.importorskip("torch")
fa = pytest.importorskip("torch.nn.attention.flex_attention")

import dsl_helpers  # noqa: F401,E402 (puts the build's package on the path)
import tessel  # noqa: E402
from tessel import flex  # noqa: E402


def _rand(*shape, seed=0, grad=False):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).requires_grad_(grad)


def _softcap(score, b, h, q_idx, kv_idx):
    return 8.0 * torch.tanh(score / 8.0)


def _halved_far(score, b, h, q_idx, kv_idx):
    return torch.where(torch.abs(q_idx - kv_idx) > 20, score * 0.5, score)


def _causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def _doc_mask(doc):
    def same_doc(b, h, q_idx, kv_idx):
        return (doc[b, q_idx] == doc[b, kv_idx]) & (q_idx >= kv_idx)
    return same_doc


def _reference(q, k, v, score_mod=None, keep=None):
    """float64 attention with the mods applied to the score matrix elementwise."""
    q, k, v = (x.detach().double() for x in (q, k, v))
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    s = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
    B, H, L, S = s.shape
    b, h, i, j = torch.meshgrid(torch.arange(B), torch.arange(H), torch.arange(L),
                                torch.arange(S), indexing="ij")
    if score_mod is not None:
        s = score_mod(s, b, h, i, j)
    if keep is not None:
        s = s.masked_fill(~keep(b, h, i, j), float("-inf"))
    return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)


MASKS = {
    "none": None,
    "causal": _causal,
    "document": _doc_mask(torch.tensor([[0] * 100 + [1] * 200, [0] * 30 + [1] * 270]))
}


@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("score_mod", [None, _softcap, _halved_far])
def test_against_float64_and_flex(mask, score_mod):
    # N = 300: the last query and key blocks of FlexAttention's 128 are cut by the length.
    q, k, v = (_rand(2, 2, 300, 16, seed=s) for s in range(3))
    keep = MASKS[mask]
    bm = None if keep is None else fa.create_block_mask(keep, 2, None, 300, 300, device="cpu")
    o, lse = tessel.flex_attention(q, k, v, score_mod=score_mod, block_mask=bm, return_lse=True)
    ref_o, ref_lse = _reference(q, k, v, score_mod, keep)
    torch.testing.assert_close(o.double(), ref_o, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lse.double(), ref_lse, atol=1e-5, rtol=1e-5)
    fo = fa.flex_attention(q, k, v, score_mod=score_mod, block_mask=bm)
    torch.testing.assert_close(o, fo, atol=1e-5, rtol=1e-5)


def _near(q_idx, kv_idx):
    return torch.abs(q_idx - kv_idx) < 40


def _local(b, h, q_idx, kv_idx):        # calls a plain helper, as FlexAttention's mods may
    return _near(q_idx, kv_idx)


DOC = torch.tensor([[0] * 100 + [1] * 200])


def _same_doc(b, h, q_idx, kv_idx):
    return DOC[b, q_idx] == DOC[b, kv_idx]


@pytest.mark.parametrize("combine", ["and", "or"])
def test_and_or_masks(combine):
    # FlexAttention's and_masks / or_masks (a fold over a tuple of mods from x.new_ones(())),
    # over a mod reading a tensor and one calling a plain helper function.
    q, k, v = (_rand(1, 2, 300, 16, seed=s) for s in range(3))
    mods = (_causal, _same_doc, _local)
    mask = (fa.and_masks if combine == "and" else fa.or_masks)(*mods)
    bm = fa.create_block_mask(mask, 1, None, 300, 300, device="cpu")
    fold = (lambda a, b: a & b) if combine == "and" else (lambda a, b: a | b)

    def keep(b, h, i, j):
        out = mods[0](b, h, i, j)
        for m in mods[1:]:
            out = fold(out, m(b, h, i, j))
        return out
    o = tessel.flex_attention(q, k, v, block_mask=bm)
    torch.testing.assert_close(o.double(), _reference(q, k, v, keep=keep)[0], atol=1e-5,
                               rtol=1e-5)
    torch.testing.assert_close(o, fa.flex_attention(q, k, v, block_mask=bm), atol=1e-5,
                               rtol=1e-5)


def test_gqa_scale_aux_and_gradients():
    q = _rand(1, 4, 64, 16, seed=1, grad=True)
    k, v = (_rand(1, 2, 64, 16, seed=s, grad=True) for s in (2, 3))
    bm = fa.create_block_mask(_causal, None, None, 64, 64, device="cpu", BLOCK_SIZE=16)
    o, aux = tessel.flex_attention(q, k, v, block_mask=bm, scale=0.3, enable_gqa=True,
                                   return_aux=fa.AuxRequest(lse=True))
    fo, faux = fa.flex_attention(q.detach(), k.detach(), v.detach(), block_mask=bm, scale=0.3,
                                 enable_gqa=True, return_aux=fa.AuxRequest(lse=True))
    torch.testing.assert_close(o, fo, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(aux.lse, faux.lse, atol=1e-5, rtol=1e-5)
    # Gradients against float64 (FlexAttention has no CPU backward).
    g = _rand(*o.shape, seed=9)
    ours = torch.autograd.grad((o * g).sum(), (q, k, v))
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    s = q64 @ k64.repeat_interleave(2, 1).transpose(-1, -2) * 0.3
    s = s.masked_fill(torch.ones(64, 64, dtype=torch.bool).tril().logical_not(), float("-inf"))
    ref = torch.softmax(s, -1) @ v64.repeat_interleave(2, 1)
    theirs = torch.autograd.grad((ref * g.double()).sum(), (q64, k64, v64))
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a.double(), b, atol=1e-5, rtol=1e-5)
    with pytest.raises(NotImplementedError, match="max_scores"):
        tessel.flex_attention(q, k, v, return_aux=fa.AuxRequest(max_scores=True))


def test_attention_backward_takes_a_flex_block_mask():
    q, k, v = (_rand(1, 2, 300, 16, seed=s) for s in range(3))
    bm = fa.create_block_mask(MASKS["document"], 1, None, 300, 300, device="cpu")
    o, lse = tessel.flex_attention(q, k, v, block_mask=bm, return_lse=True)
    do = _rand(*o.shape, seed=4)
    ours = tessel.attention_backward(q, k, v, o, lse, do, block_mask=bm)
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    want = torch.autograd.grad(tessel.flex_attention(*leaves, block_mask=bm), leaves, do)
    for a, b in zip(ours, want):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)


def test_block_mask_taken_over_once_and_checked():
    # The same FlexAttention BlockMask is one tessel BlockMask (kept); lists written in place
    # (a new version) are taken over again; a mask_mod other than the block mask's is refused.
    q, k, v = (_rand(1, 2, 300, 16, seed=s) for s in range(3))
    bm = fa.create_block_mask(_causal, None, None, 300, 300, device="cpu")
    first = flex.block_mask_of(*flex.flex_lists(bm), _causal)
    assert flex.block_mask_of(*flex.flex_lists(bm), _causal) is first
    bm.kv_num_blocks.add_(0)
    assert flex.block_mask_of(*flex.flex_lists(bm), _causal) is not first
    # A padded last key block is never full (tessel's full blocks skip the length check).
    made = flex._made(*flex.flex_lists(bm), flex._everything)
    full = made.full_kv_indices[0, 0][:made.full_kv_num_blocks[0, 0, -1]]
    assert 2 not in full.tolist()
    # tessel's own classification is taken where it visits no block FlexAttention's lists
    # leave out: a causal mask then runs the dense causal kernel, also where the length cuts
    # the last blocks (FlexAttention counts the last query block's all partial).
    assert first.is_causal
    with pytest.raises(ValueError, match="another mask_mod"):
        tessel.attention(q, k, v, mask_mod=lambda b, h, i, j: i >= j + 1, block_mask=bm)


def test_block_mask_sparser_than_its_mask_mod():
    # Lists that leave out blocks the mask_mod allows (from_kv_blocks with causal as its
    # mask_mod, diagonal blocks only): FlexAttention's blocks are kept, not tessel's own, as
    # FlexAttention's compiled kernel visits only them (its eager CPU path applies the mask_mod
    # to every pair instead: not compared).
    q, k, v = (_rand(1, 1, 256, 16, seed=s) for s in range(3))
    num = torch.tensor([[[1, 1]]], dtype=torch.int32)
    idx = torch.tensor([[[[0, 0], [1, 0]]]], dtype=torch.int32)
    bm = fa.BlockMask.from_kv_blocks(num, idx, BLOCK_SIZE=128, mask_mod=_causal)
    keep = lambda b, h, i, j: ((i // 128) == (j // 128)) & (i >= j)    # noqa: E731
    torch.testing.assert_close(tessel.flex_attention(q, k, v, block_mask=bm).double(),
                               _reference(q, k, v, keep=keep)[0], atol=1e-5, rtol=1e-5)


def test_noop_mask_block_sparsity():
    # A BlockMask made from lists with FlexAttention's noop_mask: the blocks alone.
    q, k, v = (_rand(1, 1, 256, 16, seed=s) for s in range(3))
    num = torch.tensor([[[1, 1]]], dtype=torch.int32)
    idx = torch.tensor([[[[0, 0], [1, 0]]]], dtype=torch.int32)
    bm = fa.BlockMask.from_kv_blocks(num, idx, BLOCK_SIZE=128)
    keep = lambda b, h, i, j: (i // 128) == (j // 128)      # noqa: E731
    torch.testing.assert_close(tessel.flex_attention(q, k, v, block_mask=bm).double(),
                               _reference(q, k, v, keep=keep)[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_under_torch_compile(backend):
    # One graph: the FlexAttention BlockMask's lists and the document ids are op inputs; the
    # eager results and gradients.
    doc = torch.tensor([[0] * 100 + [1] * 200])
    mask = _doc_mask(doc)
    bm = fa.create_block_mask(mask, 1, None, 300, 300, device="cpu")
    seen = []

    def counting(gm, example_inputs):
        seen.append(gm)
        return gm if backend == "aot_eager" else torch._inductor.compile(gm, example_inputs)

    def f(q, k, v):
        return tessel.flex_attention(q, k, v, score_mod=_softcap, block_mask=bm)

    q, k, v = (_rand(1, 2, 300, 16, seed=s, grad=True) for s in range(3))
    torch._dynamo.reset()
    compiled = torch.compile(f, backend=counting if backend == "aot_eager" else backend,
                             fullgraph=True)
    outs = []
    for fn in (compiled, compiled, f):
        o = fn(q, k, v)
        outs.append([o] + list(torch.autograd.grad(o.sum(), (q, k, v))))
    for c, e in zip(outs[1], outs[2]):
        torch.testing.assert_close(c, e, atol=1e-6, rtol=1e-6)
    if backend == "aot_eager":
        assert len(seen) == 1


@pytest.mark.parametrize("compiled", [False, True])
def test_the_drop_in_example_runs(compiled):
    # examples/python/flex_drop_in.py checks its output and gradients against float64 itself.
    import os
    import pathlib
    import subprocess
    import sys
    root = pathlib.Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, str(root / "examples" / "python" / "flex_drop_in.py")]
                       + (["--compile"] if compiled else []), capture_output=True, text=True,
                       timeout=600, env=dict(os.environ, TESSEL_BUILD_DIR=str(dsl_helpers.BUILD)))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("max error vs float64") == 8     # two steps, other documents


def test_create_block_mask_drop_in():
    # tessel.create_block_mask: FlexAttention's signature, tessel's classifier; its mask gives
    # tessel.flex_attention the same result as FlexAttention's own.
    q, k, v = (_rand(2, 2, 300, 16, seed=s) for s in range(3))
    mask = MASKS["document"]
    ours = tessel.create_block_mask(mask, 2, None, 300, 300, device="cpu", BLOCK_SIZE=(64, 32))
    assert isinstance(ours, tessel.BlockMask) and (ours.BLOCK_M, ours.BLOCK_N) == (64, 32)
    theirs = fa.create_block_mask(mask, 2, None, 300, 300, device="cpu")
    torch.testing.assert_close(tessel.flex_attention(q, k, v, block_mask=ours),
                               tessel.flex_attention(q, k, v, block_mask=theirs), atol=1e-6,
                               rtol=1e-6)
    with pytest.raises(ValueError, match="power of two"):
        tessel.create_block_mask(mask, 2, None, 300, 300, BLOCK_SIZE=100)
