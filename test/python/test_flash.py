"""tessel.flash: FlashAttention's API (flash_attn_func and its packed, varlen and KV-cache forms)
on torch CPU tensors (the interpreter), against float64 attention with FlashAttention's rules —
[B, S, H, D] layouts, bottom-right causal, window and ALiBi where the lengths differ, GQA —
outputs, LSEs and gradients; dropout refused."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dsl_helpers  # noqa: E402 (puts the build's package on the path)
from tessel import flash  # noqa: E402


def _rand(*shape, seed, grad=True):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g, dtype=torch.float64).float()
    return x.requires_grad_() if grad else x


def _reference(q, k, v, causal=False, window=None, softcap=None, slopes=None, scale=None,
               chunk=0):
    """float64 out [B, Sq, H, Dv] and lse [B, H, Sq] of FlashAttention's flash_attn_func
    (FlashAttention-3's attention_chunk: keys of the query's own chunk of key positions)."""
    B, Sq, H, D = q.shape
    Sk, Hkv = k.shape[1], k.shape[2]
    Q = q.double().transpose(1, 2)
    K, V = (x.double().transpose(1, 2).repeat_interleave(H // Hkv, 1) for x in (k, v))
    s = Q @ K.transpose(-1, -2) * (scale or 1 / math.sqrt(D))
    i = torch.arange(Sq)[:, None] + Sk - Sq
    j = torch.arange(Sk)[None, :]
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    if slopes is not None:
        s = s - slopes.double()[..., None, None] * (i - j).abs()
    keep = torch.ones(Sq, Sk, dtype=torch.bool)
    if causal:
        keep &= i >= j
    if window is not None:
        keep &= (j >= i - window[0]) & (j <= i + window[1])
    if chunk:
        keep &= torch.div(i, chunk, rounding_mode="floor") == j // chunk
    s = s.masked_fill(~keep, float("-inf"))
    seen = keep.any(-1)[:, None]                  # rows that see no key: 0, as FlashAttention
    p = torch.where(seen, torch.softmax(torch.where(seen, s, 0.0), -1), 0.0)
    return (p @ V).transpose(1, 2), torch.logsumexp(s, -1)


def _close(a, b, tol=2e-5):
    torch.testing.assert_close(a.double(), b, atol=tol, rtol=tol)


CASES = {
    "plain": dict(),
    "causal": dict(causal=True),
    "gqa-window": dict(causal=True, window=(5, 0), Hkv=1),
    "softcap-alibi": dict(softcap=4.0, slopes=True),
    "scale": dict(scale=0.3),
}


@pytest.mark.parametrize("lengths", [(24, 24), (9, 24), (24, 9)], ids=["equal", "fewer_q",
                                                                        "more_q"])
@pytest.mark.parametrize("case", list(CASES))
def test_flash_attn_func(case, lengths):
    c = dict(CASES[case])
    Sq, Sk = lengths
    Hkv = c.pop("Hkv", 2)
    if lengths[0] > lengths[1] and c.get("causal"):
        Sq = Sk + 3                       # the first rows see no key: FlashAttention gives 0
    q, k, v = _rand(2, Sq, 2, 16, seed=0), _rand(2, Sk, Hkv, 16, seed=1), \
        _rand(2, Sk, Hkv, 16, seed=2)
    slopes = torch.tensor([0.3, 0.1]) if c.pop("slopes", False) else None
    window = c.get("window")
    out, lse, none = flash.flash_attn_func(
        q, k, v, softmax_scale=c.get("scale"), causal=c.get("causal", False),
        window_size=window or (-1, -1), softcap=c.get("softcap", 0.0), alibi_slopes=slopes,
        return_attn_probs=True)
    assert none is None and out.shape == (2, Sq, 2, 16) and lse.shape == (2, 2, Sq)
    _check_with_gradients(out, lse, (q, k, v), causal=c.get("causal", False), window=window,
                          softcap=c.get("softcap"), slopes=slopes, scale=c.get("scale"))


def _check_with_gradients(out, lse, qkv, **ref):
    """out and lse against _reference(*qkv, **ref), then the gradients against float64
    autograd's (rows that see no key left out)."""
    ro, rl = _reference(*qkv, **ref)
    seen = torch.isfinite(rl)
    _close(out, ro)
    _close(lse[seen], rl[seen])
    g = _rand(*out.shape, seed=3, grad=False) * seen.transpose(1, 2)[..., None]
    got = torch.autograd.grad((out * g).sum(), qkv)
    refs = [x.detach().double().requires_grad_() for x in qkv]
    want = torch.autograd.grad((_reference(*refs, **ref)[0] * g.double()).sum(), refs)
    for a, b in zip(got, want):
        _close(a, b, 5e-5)


@pytest.mark.parametrize("lengths,C", [((24, 24), 8), ((24, 24), 7), ((9, 24), 10),
                                       ((27, 24), 8), ((24, 24), 40), ((27, 24), 40)],
                         ids=["equal", "ragged_chunks", "fewer_q", "more_q", "one_chunk",
                              "more_q_one_chunk"])
@pytest.mark.parametrize("case", ["causal", "plain", "window-alibi"])
@pytest.mark.parametrize("route", ["packed", "mask"])
def test_attention_chunk(lengths, C, case, route, monkeypatch):
    # FlashAttention-3's attention_chunk (Llama 4's chunked local attention): each query sees
    # the keys of its own chunk of C key positions (bottom-right placed), with causal, the
    # window and per-batch ALiBi on top; out, LSE and gradients against float64. Both routes:
    # packed sequences, and (equal lengths, C a multiple of the query block: here any) the
    # mask_mod.
    monkeypatch.setattr(flash, "CHUNK_MASK_MULTIPLE", 1 if route == "mask" else 10**9)
    Sq, Sk = lengths
    causal = case != "plain"
    window = (3, 0) if case == "window-alibi" else None
    slopes = torch.tensor([[0.3, 0.1], [0.2, 0.05]]) if case == "window-alibi" else None
    q, k, v = _rand(2, Sq, 2, 16, seed=0), _rand(2, Sk, 1, 16, seed=1), \
        _rand(2, Sk, 1, 16, seed=2)
    out, lse, _ = flash.flash_attn_func(q, k, v, causal=causal, window_size=window or (-1, -1),
                                        alibi_slopes=slopes, attention_chunk=C,
                                        return_attn_probs=True)
    _check_with_gradients(out, lse, (q, k, v), causal=causal, window=window, slopes=slopes,
                          chunk=C)


def test_attention_chunk_routes():
    # The mask_mod route takes equal lengths with C a multiple of CHUNK_MASK_MULTIPLE up to
    # CHUNK_MASK_MAX (causal; half of it not); everything else the packed sequences. One mask
    # function a chunk size.
    q = torch.zeros(1)
    m, top = flash.CHUNK_MASK_MULTIPLE, flash.CHUNK_MASK_MAX
    assert flash._chunk_by_mask(q, 4 * m, 4 * m, m, True)
    assert flash._chunk_by_mask(q, 2 * top, 2 * top, top, True)
    assert not flash._chunk_by_mask(q, 2 * top, 2 * top, top, False)
    assert flash._chunk_by_mask(q, 2 * top, 2 * top, top // 2, False)
    assert not flash._chunk_by_mask(q, 4 * m, 4 * m, m + 8, True)
    assert not flash._chunk_by_mask(q, 2 * m, 4 * m, m, True)
    assert not flash._chunk_by_mask(q, 4 * top, 4 * top, top + m, True)
    assert flash._chunk_mask(m) is flash._chunk_mask(m)
    assert flash._chunk_mask(m) is not flash._chunk_mask(2 * m)


def test_packed_forms_match_the_plain_call():
    qkv = _rand(2, 20, 3, 4, 16, seed=4)
    out = flash.flash_attn_qkvpacked_func(qkv, causal=True)
    _close(out, _reference(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], causal=True)[0])
    q, kv = _rand(2, 7, 4, 16, seed=5), _rand(2, 20, 2, 2, 16, seed=6)
    out = flash.flash_attn_kvpacked_func(q, kv, causal=True)
    _close(out, _reference(q, kv[:, :, 0], kv[:, :, 1], causal=True)[0])
    (out.sum() + 0).backward()
    assert kv.grad is not None and kv.grad.shape == kv.shape


def _varlen_reference(q, k, v, cu_q, cu_k, causal, **ref):
    out = torch.zeros(q.shape[:2] + v.shape[2:], dtype=torch.float64)
    for b in range(len(cu_q) - 1):
        qs, ks = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        out[qs] = _reference(q[None, qs], k[None, ks], v[None, ks], causal, **ref)[0][0]
    return out


@pytest.mark.parametrize("C", [4, 7, 64])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_varlen_attention_chunk(C, causal):
    # attention_chunk on packed sequences (one with more queries than keys), with seqused_k:
    # each sequence chunked on its own keys, as flash_attn_func's batch rows; gradients flow.
    q_lens, k_lens, used = [5, 17, 9, 0], [10, 20, 4, 3], [6, 20, 4, 0]
    cu_q = torch.tensor(np.cumsum([0] + q_lens), dtype=torch.int32)
    cu_k = torch.tensor(np.cumsum([0] + k_lens), dtype=torch.int32)
    q, k, v = _rand(sum(q_lens), 4, 16, seed=1), _rand(sum(k_lens), 2, 16, seed=2), \
        _rand(sum(k_lens), 2, 16, seed=3)
    out = flash.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 17, 20, causal=causal,
                                       attention_chunk=C)
    _close(out, _varlen_reference(q, k, v, cu_q.tolist(), cu_k.tolist(), causal, chunk=C))
    out.sum().backward()
    assert q.grad.abs().sum() > 0 and k.grad.abs().sum() > 0
    ends = [int(a) + n for a, n in zip(cu_k[:-1], used)]
    idx = torch.cat([torch.arange(int(a), e) for a, e in zip(cu_k[:-1], ends)])
    out = flash.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 17, 20, causal=causal,
                                       attention_chunk=C,
                                       seqused_k=torch.tensor(used, dtype=torch.int32))
    cu_used = [0] + np.cumsum(used).tolist()
    _close(out, _varlen_reference(q, k[idx], v[idx], cu_q.tolist(), cu_used, causal, chunk=C))


@pytest.mark.parametrize("C", [0, 4])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("with_used_k,window", [(False, None), (True, None), (True, (3, 2))],
                         ids=["keys", "used_keys", "used_keys-window"])
def test_varlen_seqused_q(C, causal, with_used_k, window):
    # FlashAttention-3's seqused_q: each sequence's first seqused_q[b] queries attend (placed
    # bottom-right against its used keys), the rest see no key: out 0, LSE -inf, and no
    # gradient through them (their upstream gradient is not 0 here). With attention_chunk and
    # seqused_k too; against float64 on the used rows alone.
    q_lens, k_lens = [5, 17, 9, 4], [10, 20, 4, 3]
    used_q, used_k = [3, 17, 0, 4], ([6, 20, 4, 0] if with_used_k else k_lens)
    cu_q = torch.tensor(np.cumsum([0] + q_lens), dtype=torch.int32)
    cu_k = torch.tensor(np.cumsum([0] + k_lens), dtype=torch.int32)
    q, k, v = _rand(sum(q_lens), 4, 16, seed=4), _rand(sum(k_lens), 2, 16, seed=5), \
        _rand(sum(k_lens), 2, 16, seed=6)
    out, lse, _ = flash.flash_attn_varlen_func(
        q, k, v, cu_q, cu_k, 17, 20, causal=causal, attention_chunk=C, return_attn_probs=True,
        window_size=window or (-1, -1), seqused_q=torch.tensor(used_q, dtype=torch.int32),
        seqused_k=torch.tensor(used_k, dtype=torch.int32) if with_used_k else None)
    rows = lambda cu, n: torch.cat([torch.arange(int(a), int(a) + m)  # noqa: E731
                                    for a, m in zip(cu[:-1], n)])
    qi, ki = rows(cu_q, used_q), rows(cu_k, used_k)
    cus = [[0] + np.cumsum(n).tolist() for n in (used_q, used_k)]
    refs = [x.detach().double().requires_grad_() for x in (q[qi], k[ki], v[ki])]
    want = _varlen_reference(*refs, *cus, causal, chunk=C, window=window)
    unused = torch.ones(len(q), dtype=torch.bool)
    unused[qi] = False
    _close(out[qi], want)
    assert torch.equal(out[unused], torch.zeros_like(out[unused]))
    assert torch.isneginf(lse[:, unused]).all()
    _, lse_used, _ = flash.flash_attn_varlen_func(
        q[qi], k[ki], v[ki], *(torch.tensor(c, dtype=torch.int32) for c in cus), 17, 20,
        causal=causal, attention_chunk=C, return_attn_probs=True,
        window_size=window or (-1, -1))
    assert torch.equal(lse[:, qi], lse_used)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(7))
    got = torch.autograd.grad(out, (q, k, v), g)
    wq, wk, wv = torch.autograd.grad(want, refs, g[qi].double())
    _close(got[0][qi], wq, 5e-5)
    assert torch.equal(got[0][unused], torch.zeros_like(got[0][unused]))
    unused_k = torch.ones(len(k), dtype=torch.bool)
    unused_k[ki] = False
    for a, b in ((got[1], wk), (got[2], wv)):
        _close(a[ki], b, 5e-5)
        assert torch.equal(a[unused_k], torch.zeros_like(a[unused_k]))


def test_varlen_forms():
    lengths = [5, 17, 9]
    cu = torch.tensor(np.cumsum([0] + lengths), dtype=torch.int32)
    qkv = _rand(sum(lengths), 3, 4, 16, seed=7)
    out, lse, none = flash.flash_attn_varlen_qkvpacked_func(qkv, cu, 17, causal=True,
                                                            return_attn_probs=True)
    assert none is None and lse.shape == (4, sum(lengths))
    _close(out, _varlen_reference(qkv[:, 0], qkv[:, 1], qkv[:, 2], cu.tolist(), cu.tolist(),
                                  True))
    out.sum().backward()
    assert qkv.grad.abs().sum() > 0
    q, kv = _rand(sum(lengths), 4, 16, seed=8), _rand(40, 2, 2, 16, seed=9)
    cu_k = torch.tensor([0, 10, 30, 40], dtype=torch.int32)
    out = flash.flash_attn_varlen_kvpacked_func(q, kv, cu, cu_k, 17, 20, causal=True)
    _close(out, _varlen_reference(q, kv[:, 0], kv[:, 1], cu.tolist(), cu_k.tolist(), True))
    # FlashAttention-3's seqused_k: the first n keys of each span.
    used = torch.tensor([6, 20, 9], dtype=torch.int32)
    out = flash.flash_attn_varlen_func(q, kv[:, 0], kv[:, 1], cu, cu_k, 17, 20, causal=True,
                                       seqused_k=used)
    ends = [int(a) + int(n) for a, n in zip(cu_k[:-1], used)]
    idx = torch.cat([torch.arange(int(a), e) for a, e in zip(cu_k[:-1], ends)])
    cu_used = [0] + np.cumsum(used.tolist()).tolist()
    _close(out, _varlen_reference(q, kv[idx, 0], kv[idx, 1], cu.tolist(), cu_used, True))


def test_with_kvcache():
    # A decode step with new keys appended in place; cache_seqlens None reads the whole cache.
    B, S, H, Hkv, D = 2, 32, 4, 2, 16
    kc, vc = (_rand(B, S, Hkv, D, seed=s, grad=False) for s in (10, 11))
    q = _rand(B, 1, H, D, seed=12, grad=False)
    kn, vn = (_rand(B, 1, Hkv, D, seed=s, grad=False) for s in (13, 14))
    seqlens = torch.tensor([10, 20], dtype=torch.int32)
    out, lse = flash.flash_attn_with_kvcache(q, kc, vc, k=kn, v=vn, cache_seqlens=seqlens,
                                             causal=True, return_softmax_lse=True)
    assert lse.shape == (B, H, 1)
    for b, n in enumerate(seqlens.tolist()):
        assert torch.equal(kc[b, n], kn[b, 0]) and torch.equal(vc[b, n], vn[b, 0])
        ro, rl = _reference(q[b:b + 1], kc[b:b + 1, :n + 1], vc[b:b + 1, :n + 1], True)
        _close(out[b:b + 1], ro)
        _close(lse[b:b + 1], rl)
    whole = flash.flash_attn_with_kvcache(q, kc, vc, num_splits=1)
    _close(whole, _reference(q, kc, vc)[0])


@pytest.mark.parametrize("paged", [False, True], ids=["contiguous", "paged"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_with_kvcache_attention_chunk(paged, causal):
    # attention_chunk on the KV-cache call: a decode step (one query, one new key appended)
    # sees the keys of its chunk only, the chunk starting at, before and right at the cache's
    # end; several queries in one chunk likewise; queries in two chunks, or a chunk with
    # cache_leftpad, refused.
    B, S, H, Hkv, D, C = 4, 32, 4, 2, 16, 8
    kc, vc = (_rand(B, S, Hkv, D, seed=s, grad=False) for s in (20, 21))
    seqlens = torch.tensor([7, 8, 17, 23], dtype=torch.int32)
    table = None
    if paged:       # pages of 8 rows, shuffled: sequence b's page p is page perm[4 b + p]
        perm = torch.randperm(B * S // 8, generator=torch.Generator().manual_seed(0))
        table = perm.reshape(B, S // 8).to(torch.int32)

    def cache(x):
        return x.reshape(-1, 8, Hkv, D)[torch.argsort(perm)] if paged else x

    for Sq, new in ((1, 1), (1, 0), (3, 3)):
        q = _rand(B, Sq, H, D, seed=22 + Sq, grad=False)
        kn, vn = ((_rand(B, new, Hkv, D, seed=s, grad=False) for s in (25, 26)) if new else
                  (None, None))
        lens = seqlens if Sq == 1 else torch.tensor([5, 8, 16, 21], dtype=torch.int32)
        kcc, vcc = cache(kc.clone()), cache(vc.clone())
        out = flash.flash_attn_with_kvcache(q, kcc, vcc, k=kn, v=vn, cache_seqlens=lens,
                                            block_table=table, causal=causal,
                                            attention_chunk=C)
        full_k = kc.clone()
        full_v = vc.clone()
        for b, n in enumerate(lens.tolist()):
            if new:
                full_k[b, n:n + new], full_v[b, n:n + new] = kn[b], vn[b]
            end = n + new
            start = (end - 1) // C * C
            ro, _ = _reference(q[b:b + 1], full_k[b:b + 1, start:end],
                               full_v[b:b + 1, start:end], causal)
            _close(out[b:b + 1], ro)
    q = _rand(B, 3, H, D, seed=30, grad=False)
    with pytest.raises(NotImplementedError, match="more than one chunk"):
        flash.flash_attn_with_kvcache(q, cache(kc.clone()), cache(vc.clone()),
                                      cache_seqlens=torch.tensor([9, 9, 9, 9], dtype=torch.int32),
                                      block_table=table, attention_chunk=C)
    with pytest.raises(NotImplementedError, match="cache_leftpad"):
        flash.flash_attn_with_kvcache(q[:, :1], kc, vc, cache_seqlens=seqlens,
                                      cache_leftpad=torch.zeros(B, dtype=torch.int32),
                                      attention_chunk=C)


def test_refusals_name_the_call():
    q = _rand(1, 8, 2, 16, seed=0, grad=False)
    with pytest.raises(NotImplementedError, match=r"flash_attn_func: dropout_p=0.1: tessel "
                                                  "has no attention dropout"):
        flash.flash_attn_func(q, q, q, dropout_p=0.1)
    with pytest.raises(ValueError, match=r"flash_attn_func: q must have shape \[batch, "
                                         r"seqlen, heads, head_dim\]"):
        flash.flash_attn_func(q[0], q, q)
    with pytest.raises(ValueError, match="paged cache .block_table. needs cache_seqlens"):
        flash.flash_attn_with_kvcache(q, q, q, block_table=torch.zeros(1, 1, dtype=torch.int32))


def test_flash_attention_3_keywords():
    # FlashAttention-3's scheduling keywords are taken (the results do not depend on them);
    # what tessel does not compute is refused by name, with what to do instead.
    q, k, v = (_rand(2, 24, 4, 16, seed=s, grad=False) for s in range(3))
    plain = flash.flash_attn_func(q, k, v, causal=True)
    hinted = flash.flash_attn_func(q, k, v, causal=True, num_splits=3, pack_gqa=True,
                                   sm_margin=8)
    assert torch.equal(plain, hinted)
    cu = torch.tensor([0, 24, 48], dtype=torch.int32)
    flat = [x.reshape(48, 4, 16) for x in (q, k, v)]
    assert torch.equal(flash.flash_attn_varlen_func(*flat, cu, cu, 24, 24, causal=True,
                                                    num_splits=0, pack_gqa=False),
                       plain.reshape(48, 4, 16))
    for call, kw, what in [
            (lambda **kw: flash.flash_attn_varlen_func(
                *flat, cu, cu, 24, 24, block_table=torch.zeros(2, 1, dtype=torch.int32), **kw),
             dict(seqused_q=torch.tensor([3, 4], dtype=torch.int32)), "paged cache"),
            (lambda **kw: flash.flash_attn_func(q, k, v, **kw), dict(qv=q), "concatenate q"),
            (lambda **kw: flash.flash_attn_varlen_func(
                *flat, cu, cu, 24, 24, block_table=torch.zeros(2, 1, dtype=torch.int32), **kw),
             dict(attention_chunk=8), "paged cache"),
            (lambda **kw: flash.flash_attn_with_kvcache(q, k, v, **kw),
             dict(attention_chunk=8), "split the call at the chunk boundary")]:
        with pytest.raises(NotImplementedError, match=next(iter(kw))) as info:
            call(**kw)
        assert what in str(info.value)


def test_numpy_inputs():
    # tessel's entry points take numpy arrays too; so does tessel.flash.
    q, k, v = (_rand(2, n, 2, 16, seed=s, grad=False) for s, n in ((0, 9), (1, 24), (2, 24)))
    for causal in (False, True):
        out, lse, _ = flash.flash_attn_func(q.numpy(), k.numpy(), v.numpy(), causal=causal,
                                            return_attn_probs=True)
        ro, rl = _reference(q, k, v, causal)
        _close(torch.from_numpy(out), ro)
        _close(torch.from_numpy(lse), rl)


def test_fp8_with_descales():
    # FlashAttention-3's q_descale / k_descale / v_descale: FP8 inputs, out in bfloat16.
    f8 = getattr(torch, "float8_e4m3fn", None)
    if f8 is None:
        pytest.skip("this torch has no float8_e4m3fn")
    q, k, v = (_rand(1, 16, 2, 16, seed=s, grad=False).to(f8) for s in range(3))
    dq, dk, dv = torch.tensor([[0.5, 2.0]]), torch.tensor([[1.5, 0.25]]), 0.75
    out = flash.flash_attn_func(q, k, v, causal=True, q_descale=dq, k_descale=dk, v_descale=dv)
    assert out.dtype == torch.bfloat16
    deq = [x.float() * (s[:, None, :, None] if torch.is_tensor(s) else s)   # [B, Hkv]
           for x, s in ((q, dq), (k, dk), (v, dv))]
    want = _reference(*deq, causal=True)[0]      # P is rounded to FP8 as FlashAttention-3's
    assert (out.double() - want).abs().max() <= 0.04 * want.abs().max()
    with pytest.raises(NotImplementedError, match="FP8 .q_descale, .... with query and key"):
        flash.flash_attn_func(q[:, :8], k, v, causal=True, q_descale=dq)


def test_the_drop_in_example_runs():
    # examples/python/flash_drop_in.py checks its results against float64 itself.
    import os
    import pathlib
    import subprocess
    import sys
    root = pathlib.Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, str(root / "examples" / "python" / "flash_drop_in.py")],
                       capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, TESSEL_BUILD_DIR=str(dsl_helpers.BUILD)))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("max error vs float64") == 6


@pytest.mark.parametrize("lengths,chunk", [((16, 16), 0), ((7, 16), 0), ((16, 16), 6)],
                         ids=["equal", "fewer_q", "chunk"])
def test_under_torch_compile(lengths, chunk):
    # Both routes (tessel.attention on views; attention_varlen for bottom-right causal and for
    # attention_chunk's sequences) are tessel's ops in the graph: fullgraph, the eager results
    # and gradients.
    Sq, Sk = lengths
    q = _rand(2, Sq, 2, 16, seed=0)
    k, v = _rand(2, Sk, 1, 16, seed=1), _rand(2, Sk, 1, 16, seed=2)

    def f(q, k, v):
        return flash.flash_attn_func(q, k, v, causal=True, attention_chunk=chunk)

    torch._dynamo.reset()
    outs = []
    for fn in (torch.compile(f, backend="aot_eager", fullgraph=True), f):
        o = fn(q, k, v)
        outs.append([o] + list(torch.autograd.grad(o.sum(), (q, k, v))))
    for a, b in zip(*outs):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)


def test_kvcache_attention_chunk_under_torch_compile():
    # A decode step with attention_chunk: its chunk start made by torch ops on cache_seqlens,
    # in the graph with the cache call (fullgraph), as eager.
    B, S, Hkv, D, C = 2, 32, 2, 16, 8
    kc, vc = (_rand(B, S, Hkv, D, seed=s, grad=False) for s in (40, 41))
    q = _rand(B, 1, 4, D, seed=42, grad=False)
    lens = torch.tensor([9, 24], dtype=torch.int32)

    def f(q, kc, vc, lens):
        return flash.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, causal=True,
                                             attention_chunk=C)
    torch._dynamo.reset()
    got = torch.compile(f, backend="aot_eager", fullgraph=True)(q, kc, vc, lens)
    torch.testing.assert_close(got, f(q, kc, vc, lens), atol=0, rtol=0)


def test_no_queries():
    # Zero query rows on the bottom-right route: an empty result, not an error.
    q, k = _rand(2, 0, 2, 16, seed=0, grad=False), _rand(2, 8, 2, 16, seed=1, grad=False)
    out = flash.flash_attn_func(q, k, k, causal=True)
    assert out.shape == (2, 0, 2, 16)
