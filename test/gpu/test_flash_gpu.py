"""tessel.flash (FlashAttention's API) on CUDA tensors, fp16 and bf16: outputs and gradients
against float64 with FlashAttention's rules (bottom-right causal where the lengths differ),
within twice the error of the same attention computed in the input dtype plus a floor.

    TESSEL_CACHE_DIR=$(mktemp -d) python3 -m pytest -q test/gpu/test_flash_gpu.py
"""
import math

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

from tessel import flash  # noqa: E402

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


def _reference(q, k, v, causal, dtype=torch.float64, chunk=0):
    """out [B, Sq, H, Dv] of flash_attn_func in `dtype` (bottom-right causal; attention_chunk:
    the keys of the query's own chunk of key positions)."""
    B, Sq, H, D = q.shape
    Sk, Hkv = k.shape[1], k.shape[2]
    Q = q.to(dtype).transpose(1, 2)
    K, V = (x.to(dtype).transpose(1, 2).repeat_interleave(H // Hkv, 1) for x in (k, v))
    s = (Q @ K.transpose(-1, -2)).float() / math.sqrt(D)
    i = torch.arange(Sq, device=q.device)[:, None] + Sk - Sq
    j = torch.arange(Sk, device=q.device)[None, :]
    if causal:
        s = s.masked_fill(i < j, float("-inf"))
    if chunk:
        s = s.masked_fill(torch.div(i, chunk, rounding_mode="floor") != j // chunk,
                          float("-inf"))
    return (torch.softmax(s.to(torch.float64), -1).to(dtype) @ V).transpose(1, 2)


def _check(got, want, lowp):
    err = (got.double() - want).abs().max().item()
    assert err <= 2 * (lowp.double() - want).abs().max().item() + 2e-3, err


@pytest.mark.parametrize("lengths", [(1024, 1024), (300, 1024)], ids=["equal", "fewer_q"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_flash_attn_func(dtype, D, causal, lengths):
    dt = DTYPES[dtype]
    gen = torch.Generator(device="cuda").manual_seed(D + causal)
    Sq, Sk = lengths
    q = torch.randn(2, Sq, 8, D, device="cuda", generator=gen).to(dt).requires_grad_()
    k, v = (torch.randn(2, Sk, 2, D, device="cuda", generator=gen).to(dt).requires_grad_()
            for _ in range(2))
    out = flash.flash_attn_func(q, k, v, causal=causal)
    assert out.shape == q.shape and out.dtype == dt
    _check(out, _reference(q, k, v, causal), _reference(q, k, v, causal, dt))
    g = torch.randn(out.shape, device="cuda", generator=gen).to(dt)
    got = torch.autograd.grad(out, (q, k, v), g)
    refs = [x.detach().double().requires_grad_() for x in (q, k, v)]
    want = torch.autograd.grad(_reference(*refs, causal), refs, g.double())
    tol = {"f16": 1e-2, "bf16": 5e-2}[dtype]
    for a, b in zip(got, want):
        assert (a.double() - b).abs().max().item() <= tol * max(1.0, b.abs().max().item())


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_packed_varlen_and_cache(dtype):
    dt = DTYPES[dtype]
    gen = torch.Generator(device="cuda").manual_seed(3)
    qkv = torch.randn(2, 512, 3, 8, 128, device="cuda", generator=gen).to(dt)
    out = flash.flash_attn_qkvpacked_func(qkv, causal=True)
    q, k, v = qkv.unbind(2)
    _check(out, _reference(q, k, v, True), _reference(q, k, v, True, dt))
    # The same batch as two packed sequences of 512.
    cu = torch.tensor([0, 512, 1024], dtype=torch.int32, device="cuda")
    o2 = flash.flash_attn_varlen_qkvpacked_func(qkv.reshape(1024, 3, 8, 128), cu, 512,
                                                causal=True)
    _check(o2.view(2, 512, 8, 128), _reference(q, k, v, True), _reference(q, k, v, True, dt))
    # Decode steps against a cache of 512 keys, the last key appended by the call.
    kc, vc = k.contiguous().clone(), v.contiguous().clone()
    q1 = torch.randn(2, 1, 8, 128, device="cuda", generator=gen).to(dt)
    seqlens = torch.tensor([300, 511], dtype=torch.int32, device="cuda")
    o3 = flash.flash_attn_with_kvcache(q1, kc, vc, k=k[:, -1:], v=v[:, -1:],
                                       cache_seqlens=seqlens, causal=True)
    for b, n in enumerate((301, 512)):
        ref = _reference(q1[b:b + 1], kc[b:b + 1, :n], vc[b:b + 1, :n], True)
        _check(o3[b:b + 1], ref, _reference(q1[b:b + 1], kc[b:b + 1, :n], vc[b:b + 1, :n],
                                            True, dt))


@pytest.mark.parametrize("paged", [False, True], ids=["contiguous", "paged"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_kvcache_attention_chunk(dtype, paged):
    # attention_chunk on decode steps (one query, its key appended by the call): the rows
    # before the query's chunk skipped as cache_leftpad's (the split-KV program included: 8k
    # keys); the chunk starting before and at the cache's end; paged caches of 64-row pages.
    dt = DTYPES[dtype]
    gen = torch.Generator(device="cuda").manual_seed(11)
    B, S, H, Hkv, D, C = 4, 8192, 16, 4, 128, 1024
    kc, vc = (torch.randn(B, S, Hkv, D, device="cuda", generator=gen).to(dt) for _ in range(2))
    q = torch.randn(B, 1, H, D, device="cuda", generator=gen).to(dt)
    kn, vn = (torch.randn(B, 1, Hkv, D, device="cuda", generator=gen).to(dt) for _ in range(2))
    lens = [100, 1023, 1024, 8000]
    table = None
    k_in, v_in = kc.clone(), vc.clone()
    if paged:
        perm = torch.randperm(B * S // 64, generator=torch.Generator().manual_seed(1))
        table = perm.reshape(B, S // 64).to(torch.int32).cuda()
        inv = torch.argsort(perm).cuda()
        k_in, v_in = (x.reshape(-1, 64, Hkv, D)[inv].contiguous() for x in (k_in, v_in))
    out = flash.flash_attn_with_kvcache(
        q, k_in, v_in, k=kn, v=vn, block_table=table, causal=True, attention_chunk=C,
        cache_seqlens=torch.tensor(lens, dtype=torch.int32, device="cuda"))
    for b, n in enumerate(lens):
        kk, vv = (torch.cat([x[b:b + 1, :n], y[b:b + 1]], 1) for x, y in ((kc, kn), (vc, vn)))
        start = n // C * C                          # the new key's chunk (position n)
        args = (q[b:b + 1], kk[:, start:], vv[:, start:], True)
        _check(out[b:b + 1], _reference(*args), _reference(*args, dt))


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_varlen_seqused_q(dtype):
    # FlashAttention-3's seqused_q: the used queries of each packed sequence attend (bottom-
    # right against its keys), the rest give 0; gradients flow to the used rows only.
    dt = DTYPES[dtype]
    gen = torch.Generator(device="cuda").manual_seed(12)
    q_lens, k_lens, used = [700, 1024, 64], [1024, 1024, 300], [500, 1024, 0]
    cu_q, cu_k = ([0] + torch.tensor(n).cumsum(0).tolist() for n in (q_lens, k_lens))
    q = torch.randn(sum(q_lens), 8, 128, device="cuda", generator=gen).to(dt).requires_grad_()
    k, v = (torch.randn(sum(k_lens), 2, 128, device="cuda", generator=gen).to(dt)
            .requires_grad_() for _ in range(2))
    out = flash.flash_attn_varlen_func(
        q, k, v, *(torch.tensor(c, dtype=torch.int32, device="cuda") for c in (cu_q, cu_k)),
        1024, 1024, causal=True, seqused_q=torch.tensor(used, dtype=torch.int32, device="cuda"))
    out.float().sum().backward()
    for b, n in enumerate(used):
        rows = slice(cu_q[b], cu_q[b] + n)
        keys = slice(cu_k[b], cu_k[b + 1])
        args = (q[None, rows], k[None, keys], v[None, keys], True)
        if n:
            _check(out[None, rows], _reference(*args), _reference(*args, dt))
        assert not out[cu_q[b] + n:cu_q[b + 1]].any()
        assert not q.grad[cu_q[b] + n:cu_q[b + 1]].any()


def test_fp8_descales():
    # FlashAttention-3's q_descale / k_descale / v_descale on FP8 inputs (sm_90a's FP8
    # kernels): out in bfloat16 within tessel's FP8 bound (P rounded to e4m3, docs/dev/fp8.md).
    import tessel
    if tessel.gpu.chip_of(torch.cuda.current_device()) != "sm_90a":
        pytest.skip("FP8 runs on sm_90a")
    gen = torch.Generator(device="cuda").manual_seed(8)
    q, k, v = (torch.randn(2, 1024, 8, 128, device="cuda", generator=gen)
               .to(torch.float8_e4m3fn) for _ in range(3))
    ds = [torch.rand(2, 8, device="cuda", generator=gen) + 0.5 for _ in range(3)]
    out = flash.flash_attn_func(q, k, v, causal=True, q_descale=ds[0], k_descale=ds[1],
                                v_descale=ds[2])
    assert out.dtype == torch.bfloat16
    deq = [x.double() * d.double()[:, None, :, None] for x, d in zip((q, k, v), ds)]
    want = _reference(*deq, True)
    assert (out.double() - want).abs().max() <= 0.04 * want.abs().max()


def test_the_drop_in_example_on_cuda():
    # examples/python/flash_drop_in.py --cuda checks itself against float64.
    import os
    import pathlib
    import subprocess
    import sys
    root = pathlib.Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, str(root / "examples" / "python" / "flash_drop_in.py"),
                        "--cuda"], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("max error vs float64") == 6


@pytest.mark.parametrize("lengths,chunk", [((2048, 2048), 512), ((2048, 2048), 300),
                                           ((700, 2048), 512)],
                         ids=["equal", "ragged_chunks", "fewer_q"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_attention_chunk(dtype, lengths, chunk):
    # FlashAttention-3's attention_chunk (causal): one packed varlen sequence per (batch,
    # chunk); out and gradients against float64.
    dt = DTYPES[dtype]
    gen = torch.Generator(device="cuda").manual_seed(chunk)
    Sq, Sk = lengths
    q = torch.randn(2, Sq, 8, 128, device="cuda", generator=gen).to(dt).requires_grad_()
    k, v = (torch.randn(2, Sk, 2, 128, device="cuda", generator=gen).to(dt).requires_grad_()
            for _ in range(2))
    out = flash.flash_attn_func(q, k, v, causal=True, attention_chunk=chunk)
    _check(out, _reference(q, k, v, True, chunk=chunk),
           _reference(q, k, v, True, dt, chunk=chunk))
    _check_gradients(out, (q, k, v), gen, dtype, chunk)


def _check_gradients(out, qkv, gen, dtype, chunk):
    """The gradients of out (causal, attention_chunk `chunk`) against float64 autograd's."""
    g = torch.randn(out.shape, device="cuda", generator=gen).to(DTYPES[dtype])
    got = torch.autograd.grad(out, qkv, g)
    refs = [x.detach().double().requires_grad_() for x in qkv]
    want = torch.autograd.grad(_reference(*refs, True, chunk=chunk), refs, g.double())
    tol = {"f16": 1e-2, "bf16": 5e-2}[dtype]
    for a, b in zip(got, want):
        assert (a.double() - b).abs().max().item() <= tol * max(1.0, b.abs().max().item())


@pytest.mark.parametrize("C", [1024, 300])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_chunk_mask_mod_matches_attention_chunk(dtype, C):
    # The same chunked attention as a mask_mod through tessel.attention (classified per key
    # block where C is a multiple of the query block: tile-floor-quotient-ranges; element-wise
    # otherwise) and through flash_attn_func's attention_chunk (packed varlen sequences): both
    # against float64, forward and gradients.
    import tessel
    dt = DTYPES[dtype]
    gen = torch.Generator(device="cuda").manual_seed(C)
    q = torch.randn(2, 4096, 8, 128, device="cuda", generator=gen).to(dt).requires_grad_()
    k, v = (torch.randn(2, 4096, 2, 128, device="cuda", generator=gen).to(dt).requires_grad_()
            for _ in range(2))

    def same_chunk(b, h, q_idx, kv_idx):
        return q_idx // C == kv_idx // C
    out = tessel.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                           causal=True, mask_mod=same_chunk, enable_gqa=True).transpose(1, 2)
    want = _reference(q, k, v, True, chunk=C)
    _check(out, want, _reference(q, k, v, True, dt, chunk=C))
    flash_out = flash.flash_attn_func(q, k, v, causal=True, attention_chunk=C)
    _check(flash_out, want, _reference(q, k, v, True, dt, chunk=C))
    _check_gradients(out, (q, k, v), gen, dtype, C)
