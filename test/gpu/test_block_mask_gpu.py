"""tessel.block_mask and tessel.attention(block_mask=...) on CUDA tensors (issue 13): the
classification against a dense torch brute force, attention (fp16, bf16) against float32 torch
attention with the same mask, masks that read CUDA tensors.

Run on a machine with a GPU and torch (skipped elsewhere):
    TESSEL_CACHE_DIR=$(mktemp -d) PYTHONPATH=build/python python3 -m pytest -q test/gpu/test_block_mask_gpu.py

The attention kernel takes the fast paths at fp16/bf16, d64/d128 (an indirect key loop, gathers
into registers); the classification program the reference lowering.
"""
import importlib

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tessel  # noqa: E402
from grad_check import assert_within_twice_torch  # noqa: E402
from mask_cases import document_ids  # noqa: E402

TOL = {torch.float16: 5e-3, torch.bfloat16: 2e-2}


def dense_lists(allowed, Nq, Nk, BM, BN):
    """(kv_num, full_num) per query block of a dense [Nq, Nk] bool mask (CPU)."""
    nqb, nkb = -(-Nq // BM), -(-Nk // BN)
    part, full = torch.zeros(nqb, dtype=torch.int32), torch.zeros(nqb, dtype=torch.int32)
    for i in range(nqb):
        for j in range(nkb):
            blk = allowed[i * BM:(i + 1) * BM, j * BN:(j + 1) * BN]
            if bool(blk.all()) and (j + 1) * BN <= Nk:
                full[i] += 1
            elif bool(blk.any()):
                part[i] += 1
    return part, full


def reference(q, k, v, allowed):
    """float32 attention with an explicit [B|1, H|1, Nq, Nk] mask; rows with no key give 0."""
    q, k, v = q.float(), k.float(), v.float()
    s = torch.einsum("bhqd,bhkd->bhqk", q, k) / q.shape[-1] ** 0.5
    s = s.masked_fill(~allowed, float("-inf"))
    return torch.softmax(s, dim=-1).nan_to_num(0.0) @ v


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("D", [64, 128, 256])   # d256: 128x32 kernel blocks (GPU_BLOCKS_MODS)
@pytest.mark.parametrize("N", [256, 333])
def test_document_mask_from_cuda_ids(dtype, D, N):
    B, H = 2, 4
    gen = torch.Generator(device="cuda").manual_seed(N + D)
    doc = document_ids(torch, B, N, gen)

    def mask(b, h, q_idx, kv_idx):
        return (doc[b, q_idx] == doc[b, kv_idx]) & (q_idx >= kv_idx)

    bm = tessel.block_mask(mask, B, None, N, N, device="cuda")
    qi = torch.arange(N, device="cuda")[:, None]
    ki = torch.arange(N, device="cuda")[None, :]
    allowed = (doc[:, :, None] == doc[:, None, :]) & (qi >= ki)          # [B, N, N]
    for b in range(B):
        part, full = dense_lists(allowed[b].cpu(), N, N, bm.BLOCK_M, bm.BLOCK_N)
        assert torch.equal(bm.kv_num_blocks[b, 0].cpu(), part)
        assert torch.equal(bm.full_kv_num_blocks[b, 0].cpu(), full)
    q, k, v = (torch.randn(B, H, N, D, device="cuda", generator=gen).to(dtype) for _ in range(3))
    o = tessel.attention(q, k, v, mask_mod=mask, block_mask=bm)
    want = reference(q, k, v, allowed[:, None])
    assert (o.float() - want).abs().max().item() < TOL[dtype] * max(1.0, want.abs().max().item())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("D", [96, 80, 40])
@pytest.mark.parametrize("how", ["block_mask", "auto", "auto-gqa-view"])
def test_block_head_dim_block_sparse(monkeypatch, dtype, D, how):
    """attention.BLOCK_HEAD_DIM_SPARSE (off until this passes): a document mask at a head dim
    the fast paths pad runs the block-sparse kernel with blocks of the padded head dim over q,
    k and v as they are (DB), not on padded copies — given a block mask, or building one for a
    mask that reads tensors (GQA, a BSHD view of q) — against float32, 1000 tokens (not a
    multiple of the blocks)."""
    attn = importlib.import_module("tessel.attention")
    chip = tessel.gpu.chip_of(torch.cuda.current_device())
    monkeypatch.setattr(attn, "BLOCK_HEAD_DIM_SPARSE", True)
    monkeypatch.setattr(attn, "BLOCK_HEAD_DIM_CHIPS", (chip,))
    monkeypatch.setattr(attn, "_attention_padded",
                        lambda *a, **kw: pytest.fail("took the padded path"))
    B, H, N = 2, 4, 1000
    Hkv = 2 if how.endswith("gqa-view") else H
    gen = torch.Generator(device="cuda").manual_seed(N + D + len(how))
    doc = document_ids(torch, B, N, gen)

    def mask(b, h, q_idx, kv_idx):
        return (doc[b, q_idx] == doc[b, kv_idx]) & (q_idx >= kv_idx)

    q = torch.randn(B, N, H, D, device="cuda", generator=gen).to(dtype).transpose(1, 2) \
        if how.endswith("view") else torch.randn(B, H, N, D, device="cuda", generator=gen).to(dtype)
    k, v = (torch.randn(B, Hkv, N, D, device="cuda", generator=gen).to(dtype) for _ in range(2))
    bm = tessel.block_mask(mask, B, None, N, N, device="cuda") if how == "block_mask" else None
    o, lse = tessel.attention(q, k, v, mask_mod=mask, block_mask=bm, enable_gqa=Hkv != H,
                              return_lse=True)
    qi = torch.arange(N, device="cuda")[:, None]
    ki = torch.arange(N, device="cuda")[None, :]
    allowed = ((doc[:, :, None] == doc[:, None, :]) & (qi >= ki))[:, None]
    kr, vr = (x.repeat_interleave(H // Hkv, dim=1) for x in (k, v))
    want = reference(q, kr, vr, allowed)
    assert o.shape == q.shape and o.dtype == dtype
    assert (o.float() - want).abs().max().item() < TOL[dtype] * max(1.0, want.abs().max().item())
    s = torch.einsum("bhqd,bhkd->bhqk", q.float(), kr.float()) / D ** 0.5
    want_lse = torch.logsumexp(s.masked_fill(~allowed, float("-inf")), dim=-1)
    assert (lse - want_lse).abs().max().item() < 1e-2


@pytest.mark.parametrize("D", [96, 80])
@pytest.mark.parametrize("explicit", [True, False], ids=["block_mask", "automatic"])
def test_block_head_dim_block_sparse_gradients(monkeypatch, explicit, D):
    """attention.BLOCK_HEAD_DIM_SPARSE with gradients: the block-sparse forward and backward
    (blocksparse_backward's programs) with blocks of the padded head dim over the tensors as
    they are give float64 autograd's gradients (within twice bf16's own error); nothing is
    padded."""
    from tessel import backward as bw
    attn = importlib.import_module("tessel.attention")
    chip = tessel.gpu.chip_of(torch.cuda.current_device())
    monkeypatch.setattr(attn, "BLOCK_HEAD_DIM_SPARSE", True)
    monkeypatch.setattr(attn, "BLOCK_HEAD_DIM_CHIPS", (chip,))
    monkeypatch.setattr(bw, "BLOCK_HEAD_DIM_CHIPS", (chip,))
    monkeypatch.setattr(attn, "_attention_padded",
                        lambda *a, **kw: pytest.fail("took the padded path"))
    monkeypatch.setattr(bw, "_backward_padded",
                        lambda *a, **kw: pytest.fail("took the padded backward"))
    check_document_gradients(D, explicit, D + explicit)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
def test_random_block_sparse_and_rows_without_keys(dtype):
    B, H, N, D, G = 1, 2, 320, 64, 32
    gen = torch.Generator(device="cuda").manual_seed(7)
    blocks = torch.rand(N // G, N // G, device="cuda", generator=gen) < 0.3
    blocks[3] = False                                    # query rows 96..127 see no key

    def mask(b, h, q_idx, kv_idx):
        return blocks[q_idx // G, kv_idx // G]

    bm = tessel.block_mask(mask, None, None, N, N, device="cuda")
    allowed = blocks.repeat_interleave(G, 0).repeat_interleave(G, 1)
    part, full = dense_lists(allowed.cpu(), N, N, bm.BLOCK_M, bm.BLOCK_N)
    assert torch.equal(bm.kv_num_blocks[0, 0].cpu(), part)
    assert torch.equal(bm.full_kv_num_blocks[0, 0].cpu(), full)
    q, k, v = (torch.randn(B, H, N, D, device="cuda", generator=gen).to(dtype) for _ in range(3))
    o, lse = tessel.attention(q, k, v, mask_mod=mask, block_mask=bm, return_lse=True)
    want = reference(q, k, v, allowed)
    assert (o.float() - want).abs().max().item() < TOL[dtype] * max(1.0, want.abs().max().item())
    assert torch.all(o[:, :, 96:128] == 0) and torch.all(torch.isinf(lse[:, :, 96:128]))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("D", [64, 128, 256])
@pytest.mark.parametrize("case", ["prefix_lm", "rel_bias", "alibi_window"])
def test_mods_that_read_tensors(case, D, dtype):
    """Masks and biases read from CUDA tensors under a block mask, 300 tokens (not a multiple of
    the blocks), against float32 attention with the same mask and bias."""
    B, H, N = 2, 4, 300
    gen = torch.Generator(device="cuda").manual_seed(D + len(case))
    prefix = torch.tensor([37, 201], dtype=torch.int32, device="cuda")
    rel = torch.randn(H, 2 * N - 1, device="cuda", generator=gen)
    slopes = torch.tensor([2.0 ** (-(i + 1)) for i in range(H)], device="cuda")
    qi = torch.arange(N, device="cuda")[:, None]
    ki = torch.arange(N, device="cuda")[None, :]
    score_mod = None
    bias = torch.zeros(1, H, N, N, device="cuda")
    if case == "prefix_lm":
        def mask(b, h, q_idx, kv_idx):
            return (kv_idx < prefix[b]) | (q_idx >= kv_idx)
        allowed = (ki < prefix[:, None, None]) | (qi >= ki)                 # [B, N, N]
        bB = B
    elif case == "rel_bias":
        def mask(b, h, q_idx, kv_idx):
            return q_idx >= kv_idx

        def score_mod(s, b, h, q_idx, kv_idx):
            return s + rel[h, q_idx - kv_idx + N - 1]
        allowed = (qi >= ki)[None]
        bias = rel[:, (qi - ki + N - 1)][None]
        bB = None
    else:
        def mask(b, h, q_idx, kv_idx):
            return (q_idx >= kv_idx) & (q_idx - kv_idx < 100)

        def score_mod(s, b, h, q_idx, kv_idx):
            return s + slopes[h] * (kv_idx - q_idx)
        allowed = ((qi >= ki) & (qi - ki < 100))[None]
        bias = (slopes[:, None, None] * (ki - qi))[None]
        bB = None
    bm = tessel.block_mask(mask, bB, None, N, N, device="cuda")
    q, k, v = (torch.randn(B, H, N, D, device="cuda", generator=gen).to(dtype) for _ in range(3))
    o = tessel.attention(q, k, v, mask_mod=mask, score_mod=score_mod, block_mask=bm)
    s = torch.einsum("bhqd,bhkd->bhqk", q.float(), k.float()) / D ** 0.5 + bias
    s = s.masked_fill(~allowed[:, None], float("-inf"))
    want = torch.softmax(s, dim=-1).nan_to_num(0.0) @ v.float()
    assert (o.float() - want).abs().max().item() < TOL[dtype] * max(1.0, want.abs().max().item())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
def test_automatic_block_mask(dtype):
    """tessel.attention with a mask that reads a CUDA tensor and no block_mask builds one
    (causal folded in), keeps it while the tensor is unchanged, and builds a new one after an
    in-place write."""
    from tessel import blocksparse as bs
    B, H, N, D = 2, 4, 700, 128
    gen = torch.Generator(device="cuda").manual_seed(11)
    doc = torch.zeros(B, N, dtype=torch.int32, device="cuda")
    doc[:, 300:] = 1

    def mask(b, h, q_idx, kv_idx):
        return doc[b, q_idx] == doc[b, kv_idx]
    q, k, v = (torch.randn(B, H, N, D, device="cuda", generator=gen).to(dtype) for _ in range(3))
    qi = torch.arange(N, device="cuda")[:, None]
    ki = torch.arange(N, device="cuda")[None, :]
    bs._auto_masks.clear()
    for step in range(2):
        o = tessel.attention(q, k, v, mask_mod=mask, causal=True)
        allowed = (doc[:, :, None] == doc[:, None, :]) & (qi >= ki)
        want = reference(q, k, v, allowed[:, None])
        assert (o.float() - want).abs().max().item() < TOL[dtype] * max(
            1.0, want.abs().max().item())
        tessel.attention(q, k, v, mask_mod=mask, causal=True)          # the same block mask
        assert len(bs._auto_masks) == step + 1
        doc[:, 500:] = 2                                                 # in place: rebuilt


@pytest.mark.parametrize("D", [64, 128, 256])
def test_a_causal_block_mask_runs_the_dense_causal_kernel(D):
    """A block mask of causal's mask_mod (BlockMask.is_causal, worked out on the GPU) runs
    tessel.attention's dense causal kernel: the dense call's output bit for bit, and its
    backward's gradients."""
    B, H, N = 2, 4, 1000
    gen = torch.Generator(device="cuda").manual_seed(D)

    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx
    bm = tessel.block_mask(causal, None, None, N, N, device="cuda")
    assert bm.is_causal
    q, k, v, do = (torch.randn(B, H, N, D, device="cuda", generator=gen).to(torch.float16)
                   for _ in range(4))
    assert torch.equal(tessel.attention(q, k, v, mask_mod=causal, block_mask=bm),
                       tessel.attention(q, k, v, causal=True))
    leaves = [[x.clone().requires_grad_() for x in (q, k, v)] for _ in range(2)]
    tessel.attention(*leaves[0], mask_mod=causal, block_mask=bm).backward(do)
    tessel.attention(*leaves[1], causal=True).backward(do)
    # dK and dV as written by the same program; dQ may be added up by float32 atomics
    # (backward.FUSED_DQ_DIMS), in an order that varies from run to run.
    dq, dq_dense = leaves[0][0].grad.float(), leaves[1][0].grad.float()
    assert (dq - dq_dense).abs().max() <= 1e-2 * max(1.0, dq_dense.abs().max().item())
    for a, b in zip(leaves[0][1:], leaves[1][1:]):
        assert torch.equal(a.grad, b.grad)


@pytest.mark.parametrize("D,candidates", [(64, False), (256, False), (256, True)],
                         ids=["d64", "d256", "d256-candidates"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("explicit", [True, False], ids=["block_mask", "automatic"])
def test_gradients_with_a_block_mask(explicit, sparse, D, candidates, monkeypatch):
    """Inputs that require grad: the block-sparse forward and the backward — the dense programs
    with the mask_mod, or blocksparse_backward's (backward.SPARSE_BACKWARD_ON_GPU) — give the
    gradients of float64 autograd with the same mask (within twice the error of the same
    computation in bf16). d256 splits dV and dK (SPLIT_KEYROWS); `candidates`: d256's
    candidate blocks (the dK program on 32 query rows, the dQ program on 32 keys)."""
    from tessel import backward as bw
    monkeypatch.setattr(bw, "SPARSE_BACKWARD_ON_GPU", sparse)
    if candidates:
        monkeypatch.setattr(bw, "KEYROWS_DK_BLOCK_M", {D: 32})
        monkeypatch.setattr(bw, "FAST_DQ_BLOCKS_SM90", {D: (64, 32)})
    check_document_gradients(D, explicit, 5)


def check_document_gradients(D, explicit, seed):
    """The gradients of tessel.attention under a document mask read from a CUDA tensor (two
    documents a sequence; the block mask given when `explicit`, else made by tessel), bf16 at
    head dim D, against float64 autograd within twice bf16's own error."""
    B, H, N = 2, 2, 300
    gen = torch.Generator(device="cuda").manual_seed(seed)
    doc = torch.zeros(B, N, dtype=torch.int32, device="cuda")
    doc[0, 100:] = 1
    doc[1, 200:] = 1

    def mask(b, h, q_idx, kv_idx):
        return (doc[b, q_idx] == doc[b, kv_idx]) & (q_idx >= kv_idx)
    q, k, v, do = (torch.randn(B, H, N, D, device="cuda", generator=gen).to(torch.bfloat16)
                   for _ in range(4))
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    extra = dict(block_mask=tessel.block_mask(mask, B, None, N, N, device="cuda")) \
        if explicit else {}
    o = tessel.attention(*leaves, mask_mod=mask, **extra)
    assert o.grad_fn is not None and o.shape == q.shape
    o.backward(do)
    qi = torch.arange(N, device="cuda")[:, None]
    ki = torch.arange(N, device="cuda")[None, :]
    allowed = ((doc[:, :, None] == doc[:, None, :]) & (qi >= ki))[:, None]

    def grads(xs, dout):
        s = xs[0] @ xs[1].transpose(-1, -2) / D ** 0.5
        (torch.softmax(s.masked_fill(~allowed, float("-inf")), -1) @ xs[2]).backward(dout)
        return [x.grad for x in xs]
    want = grads([x.double().requires_grad_() for x in (q, k, v)], do.double())
    low = grads([x.clone().requires_grad_() for x in (q, k, v)], do)
    assert_within_twice_torch([x.grad for x in leaves], want, low)
