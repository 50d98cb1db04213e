"""Captured tensors on the GPU (issue 13, first half): masks and biases that read CUDA tensors
with tile.gather, fp16 and bf16, against a float32 torch reference with the same mask and bias.

Run on a machine with a GPU and torch (skipped elsewhere):
    TESSEL_CACHE_DIR=$(mktemp -d) PYTHONPATH=build/python python3 -m pytest -q test/gpu/test_captured_gpu.py

codegen=auto refuses a program with a gather on the fast paths (MmaClass.cpp), so these run on
the reference lowering: correct, not fast.
"""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tessel  # noqa: E402
from tessel.attention import attention_kernel  # noqa: E402

TOL = {torch.float16: 5e-3, torch.bfloat16: 2e-2}
B, H = 2, 4


def reference(q, k, v, allowed=None, bias=None, causal=False):
    """float32 attention on the GPU with an explicit [B|1, H|1, Nq, Nk] mask and bias; rows that
    see no key give 0 and lse -inf."""
    q, k, v = q.float(), k.float(), v.float()
    s = torch.einsum("bhqd,bhkd->bhqk", q, k) / q.shape[-1] ** 0.5
    if bias is not None:
        s = s + bias
    nq, nk = s.shape[-2:]
    keep = torch.ones(nq, nk, dtype=torch.bool, device=q.device)
    if causal:
        keep = keep.tril()
    keep = keep.expand_as(s) if allowed is None else keep & allowed
    s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return p @ v, lse


def documents(N, lengths, gen):
    doc = torch.zeros(B, N, dtype=torch.int64)
    for b in range(B):
        order = torch.randperm(len(lengths), generator=gen)
        cuts = torch.tensor(lengths)[order].cumsum(0)[:-1]
        doc[b] = torch.searchsorted(cuts, torch.arange(N), right=True)
    return doc.cuda()


def inputs(N, D, dtype, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(B, H, N, D, generator=gen, device="cuda").to(dtype) for _ in range(3)]


def make_document_mask(doc):
    def mask(b, h, q_idx, kv_idx):
        return doc[b, q_idx] == doc[b, kv_idx]
    return mask


def check(o, lse, ref_o, ref_lse, dtype):
    err = (o.float() - ref_o).abs().max().item() / max(1.0, ref_o.abs().max().item())
    assert err < TOL[dtype], err
    finite = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse), finite)
    assert (lse[finite] - ref_lse[finite]).abs().max().item() < 1e-2


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_document_mask(dtype, D, causal):
    N = 1000                                            # not a multiple of any block
    gen = torch.Generator().manual_seed(D)
    doc = documents(N, [300, 200, 500], gen)            # int64, narrowed after a check
    q, k, v = inputs(N, D, dtype, seed=1)
    o, lse = tessel.attention(q, k, v, causal=causal, mask_mod=make_document_mask(doc),
                              return_lse=True)
    allowed = (doc[:, None, :, None] == doc[:, None, None, :])
    check(o, lse, *reference(q, k, v, allowed=allowed, causal=causal), dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_relative_bias_and_rows_without_keys(dtype):
    N, D = 300, 64
    q, k, v = inputs(N, D, dtype, seed=2)
    gen = torch.Generator(device="cuda").manual_seed(3)
    rel = torch.randn(H, 2 * N - 1, generator=gen, device="cuda")
    keep = torch.ones(B, N, dtype=torch.bool, device="cuda")
    keep[:, 7] = False                                  # query 7 sees no key

    def score_mod(score, b, h, q_idx, kv_idx):
        return score + rel[h, q_idx - kv_idx + N - 1]

    def mask_mod(b, h, q_idx, kv_idx):
        return keep[b, q_idx]
    o, lse = tessel.attention(q, k, v, score_mod=score_mod, mask_mod=mask_mod, return_lse=True)
    i = torch.arange(N, device="cuda")
    bias = rel[:, (i[:, None] - i[None, :] + N - 1)][None]
    allowed = keep[:, None, :, None].expand(B, H, N, N)
    check(o, lse, *reference(q, k, v, allowed=allowed, bias=bias), dtype)
    assert torch.all(o[:, :, 7] == 0) and torch.all(torch.isneginf(lse[:, :, 7]))


def test_new_tensors_reuse_the_kernel(monkeypatch):
    N, D, dtype = 256, 64, torch.float16
    q, k, v = inputs(N, D, dtype, seed=4)
    count = [0]
    original = attention_kernel.compile
    monkeypatch.setattr(attention_kernel, "compile",
                        lambda *a, **kw: count.__setitem__(0, count[0] + 1) or original(*a, **kw))
    for seed in range(3):
        doc = documents(N, [100, 56, 100], torch.Generator().manual_seed(seed)).int()
        o = tessel.attention(q, k, v, mask_mod=make_document_mask(doc))
        allowed = (doc[:, None, :, None] == doc[:, None, None, :])
        ref, _ = reference(q, k, v, allowed=allowed)
        assert (o.float() - ref).abs().max().item() < TOL[dtype]
        # The first call traces (with the fast path's blocks, to find the captures, then with
        # gather_blocks); the next ones, with new tensors, trace nothing.
        first = count[0] if seed == 0 else first
    assert count[0] == first


def test_a_numpy_table_on_the_gpu_is_a_located_error():
    import numpy as np
    table = np.zeros((4, 4), np.int32)
    q, k, v = inputs(64, 64, torch.float16, seed=5)
    with pytest.raises(tessel.CompilationError) as err:
        tessel.attention(q, k, v, mask_mod=lambda b, h, qi, ki: table[qi, ki] == 0)
    assert "is a numpy array, but the kernel runs on the GPU" in err.value.message
    assert err.value.filename == __file__
