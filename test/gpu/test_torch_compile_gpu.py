"""tessel under torch.compile on the GPU (python/tessel/torch_ops.py): fullgraph compiles with
inductor of attention forward + backward, attention_varlen with gradients and a decode step
that appends to the KV cache, each against the eager call (the op runs the same kernels: equal
bits) and the forward against float32 SDPA; and CUDA graphs (mode="reduce-overhead"), which
capture the op's launches.

    TESSEL_CACHE_DIR=$(mktemp -d) python3 -m pytest -q test/gpu/test_torch_compile_gpu.py
"""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tessel  # noqa: E402
from tessel import language as tl  # noqa: E402

F = torch.nn.functional


def _rand(*shape, dtype=torch.float16, seed=0, grad=False):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(*shape, device="cuda", dtype=dtype, generator=g)
    return x.requires_grad_(grad)


def _step(fn, inputs):
    for x in inputs:
        x.grad = None
    o = fn(*inputs)
    g = torch.Generator(device="cuda").manual_seed(7)
    (o.float() * torch.randn(o.shape, device="cuda", generator=g)).sum().backward()
    return o.detach(), [x.grad.clone() for x in inputs]


def _same_as_eager(fn, inputs, fullgraph=True):
    """fn compiled (inductor) against fn eager: output and gradients bit for bit (the op runs
    the eager kernels); returns the compiled output."""
    torch._dynamo.reset()
    o_c, g_c = _step(torch.compile(fn, fullgraph=fullgraph), inputs)
    o_e, g_e = _step(fn, inputs)
    for a, b in zip([o_c] + g_c, [o_e] + g_e):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
    return o_c


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 128])
def test_attention_inductor_fullgraph(dtype, causal, D):
    q, k, v = (_rand(2, 4, 1000, D, dtype=dtype, seed=s, grad=True) for s in range(3))

    def f(q, k, v):
        return tessel.attention(q * 1.0, k, v, causal=causal)

    o_c = _same_as_eager(f, (q, k, v))
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    torch.testing.assert_close(o_c.float(), ref, atol=2e-2, rtol=2e-2)


def test_varlen_inductor_fullgraph():
    lengths = [300, 1, 777, 64]
    cu = torch.tensor([0, 300, 301, 1078, 1142], dtype=torch.int32, device="cuda")
    q, k, v = (_rand(1142, 8, 128, seed=s, grad=True) for s in range(3))

    def f(q, k, v):
        return tessel.attention_varlen(q, k, v, cu, cu, max(lengths), max(lengths), causal=True)

    _same_as_eager(f, (q, k, v))


def test_kvcache_append_inductor_fullgraph():
    B, S, H, Hkv, D = 4, 4096, 32, 8, 128
    kc, vc = (_rand(B, S, Hkv, D, seed=s) for s in (1, 2))
    seqlens = torch.tensor([100, 4000, 1, 2048], dtype=torch.int32, device="cuda")
    q = _rand(B, 1, H, D, seed=3)
    kn, vn = (_rand(B, 1, Hkv, D, seed=s) for s in (4, 5))

    def f(q, kc, vc):
        return tessel.attention_with_kvcache(q, kc, vc, seqlens, k=kn, v=vn, causal=True)

    torch._dynamo.reset()
    caches_c = (kc.clone(), vc.clone())
    o_c = torch.compile(f, fullgraph=True)(q, *caches_c)
    caches_e = (kc.clone(), vc.clone())
    o_e = f(q, *caches_e)
    torch.testing.assert_close(o_c, o_e, atol=0, rtol=0)
    for a, b in zip(caches_c, caches_e):
        torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_cuda_graphs_reduce_overhead():
    # mode="reduce-overhead" captures the compiled function in a CUDA graph: tessel's launches
    # go into it (torch's current stream) and replay with new inputs copied in.
    q, k, v = (_rand(1, 8, 512, 128, seed=s) for s in range(3))

    def f(q, k, v):
        return tessel.attention(q, k, v, causal=True) + 1

    torch._dynamo.reset()
    compiled = torch.compile(f, mode="reduce-overhead", fullgraph=True)
    for seed in range(4):                   # warm-up runs, the recording, replays
        q, k, v = (_rand(1, 8, 512, 128, seed=10 * seed + s) for s in range(3))
        torch.testing.assert_close(compiled(q, k, v).clone(), f(q, k, v), atol=0, rtol=0)


def _alibi_like(score, b, h, q_idx, kv_idx):
    return score - 0.01 * (h + 1) * (q_idx - kv_idx)


def _softcap(score, b, h, q_idx, kv_idx):
    return 20.0 * tl.tanh(score / 20.0)


def test_mods_in_the_graph_inductor():
    # Module functions: in the graph (fullgraph). A lambda over a closure made inside the
    # compiled function: in the graph where Dynamo lets tessel read the closure (torch 2.15),
    # a graph break where it does not (torch 2.11 on Python 3.12: "Unsupported hasattr call"),
    # the eager result either way.
    q, k, v = (_rand(2, 8, 1024, 128, seed=s, grad=True) for s in range(3))

    def f(q, k, v):
        return tessel.attention(q, k, v, score_mod=_alibi_like, causal=True) + \
            tessel.attention(q, k, v, score_mod=_softcap)

    def g(q, k, v):
        cap = 20.0
        return tessel.attention(q, k, v, score_mod=lambda s, b, h, i, j: cap * tl.tanh(s / cap))

    _same_as_eager(f, (q, k, v))
    _same_as_eager(g, (q, k, v), fullgraph=False)


def test_sdpa_drop_in_masked_inductor():
    q, k, v = (_rand(2, 8, 1000, 128, seed=s, grad=True) for s in range(3))
    lengths = torch.tensor([1000, 637], device="cuda")

    def f(q, k, v):
        keep = torch.arange(1000, device="cuda")[None, :] < lengths[:, None]
        return tessel.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :])

    _same_as_eager(f, (q, k, v))


def _doc_mask(doc):
    def same_doc(b, h, q_idx, kv_idx):
        return doc[b, q_idx] == doc[b, kv_idx]
    return same_doc


@pytest.mark.parametrize("with_block_mask", [False, True])
def test_document_mask_inductor_fullgraph(with_block_mask, monkeypatch):
    # FlexAttention's document mask over a closure's tensor, with its block mask or the one
    # tessel makes per call: the tensor and the lists are op inputs (one graph). Without a
    # block mask the backward op's attention_backward takes the forward's automatic block mask
    # as eager autograd does (backward.AUTO_BLOCK_MASK, checked here): the same programs, so
    # the same bits.
    from tessel import backward
    monkeypatch.setattr(backward, "AUTO_BLOCK_MASK", True)
    N = 2048
    doc = torch.cat([torch.arange(N, device="cuda")[None] // 300,
                     torch.arange(N, device="cuda")[None] // 1000]).int()
    mask = _doc_mask(doc)
    bm = tessel.block_mask(mask, 2, None, N, N, like=doc) if with_block_mask else None
    q, k, v = (_rand(2, 8, N, 128, seed=s, grad=True) for s in range(3))

    def f(q, k, v):
        return tessel.attention(q, k, v, mask_mod=mask, block_mask=bm, deterministic=True)

    o_c = _same_as_eager(f, (q, k, v))
    keep = (doc[:, :, None] == doc[:, None, :])[:, None]
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=keep)
    torch.testing.assert_close(o_c.float(), ref, atol=2e-2, rtol=2e-2)
