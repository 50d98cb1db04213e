"""Code written against FlashAttention moved to tessel by changing one import:
`from flash_attn import ...` -> `from tessel.flash import ...`. The calls are FlashAttention's:
a causal self-attention layer on a packed qkv projection ([B, S, 3, H, D]) with gradients, the
same batch as packed variable-length sequences, a decode step that appends its key and
value to a KV cache, and Llama 4's chunked local attention (FlashAttention-3's
`attention_chunk`) in prefill and decode. Each result is checked against float64 attention.

    python3 examples/python/flash_drop_in.py            # CPU tensors: the interpreter
    python3 examples/python/flash_drop_in.py --cuda     # CUDA tensors (fp16)
"""
import argparse

import _common  # noqa: F401 (finds tessel)
import torch

from tessel.flash import (flash_attn_func, flash_attn_qkvpacked_func,  # was flash_attn
                          flash_attn_varlen_func, flash_attn_with_kvcache)


def reference(q, k, v, causal, chunk=0):
    """float64 attention of [B, Sq, H, D] against [B, Sk, H, D], bottom-right causal; chunk:
    each query sees the keys of its own chunk of that many key positions only."""
    Sq, Sk = q.shape[1], k.shape[1]
    s = torch.einsum("bqhd,bkhd->bhqk", q.double(), k.double()) * q.shape[-1] ** -0.5
    i = torch.arange(Sq, device=q.device)[:, None] + Sk - Sq
    j = torch.arange(Sk, device=q.device)[None, :]
    if causal:
        s = s.masked_fill(i < j, float("-inf"))
    if chunk:
        s = s.masked_fill(i // chunk != j // chunk, float("-inf"))
    return torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, -1), v.double())


def check(name, got, want, tol):
    err = ((got.double() - want).abs().max() / want.abs().max()).item()
    print(f"flash_drop_in: {name} max error vs float64 {err:.2e}")
    assert err < tol, name


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cuda", action="store_true", help="run on the GPU (fp16)")
    args = ap.parse_args()
    dev, dt, tol = ("cuda", torch.float16, 2e-2) if args.cuda else ("cpu", torch.float32, 1e-5)
    B, S, H, D = (4, 1024, 8, 128) if args.cuda else (2, 48, 2, 16)
    gen = torch.Generator(device=dev).manual_seed(0)

    # A causal self-attention layer on the qkv projection, forward and backward.
    qkv = torch.randn(B, S, 3, H, D, device=dev, dtype=dt, generator=gen).requires_grad_()
    out = flash_attn_qkvpacked_func(qkv, causal=True)
    do = torch.randn(out.shape, device=dev, dtype=dt, generator=gen)
    (dqkv,) = torch.autograd.grad(out, qkv, do)
    leaf = qkv.detach().double().requires_grad_()
    ref = reference(*leaf.unbind(2), causal=True)
    (ref_dqkv,) = torch.autograd.grad(ref, leaf, do.double())
    check("o", out, ref, tol)
    check("dqkv", dqkv, ref_dqkv, tol)

    # The same batch as B packed sequences (flash_attn_varlen_func).
    q, k, v = (x.detach().reshape(B * S, H, D) for x in qkv.unbind(2))
    cu = torch.arange(0, (B + 1) * S, S, dtype=torch.int32, device=dev)
    packed = flash_attn_varlen_func(q, k, v, cu, cu, S, S, causal=True)
    check("varlen o", packed.view(B, S, H, D), ref, tol)

    # A decode step: one new query, its key and value appended to the cache in place.
    k_cache, v_cache = (torch.zeros(B, S + 1, H, D, device=dev, dtype=dt) for _ in range(2))
    k_cache[:, :S], v_cache[:, :S] = qkv[:, :, 1].detach(), qkv[:, :, 2].detach()
    q1, k1, v1 = (torch.randn(B, 1, H, D, device=dev, dtype=dt, generator=gen)
                  for _ in range(3))
    seqlens = torch.full((B,), S, dtype=torch.int32, device=dev)
    step = flash_attn_with_kvcache(q1, k_cache, v_cache, k=k1, v=v1, cache_seqlens=seqlens,
                                   causal=True)
    check("decode o", step, reference(q1, k_cache, v_cache, causal=True), tol)

    # Chunked local attention (Llama 4's local layers): a query sees only the keys of its own
    # chunk of C positions, in the prompt and in the decode step after it.
    C = S // 4
    q, k, v = (x.detach() for x in qkv.unbind(2))
    local = flash_attn_func(q, k, v, causal=True, attention_chunk=C)
    check("chunked o", local, reference(q, k, v, causal=True, chunk=C), tol)
    n = S - S // 8                          # a decode step inside a chunk: its rows before n
    step = flash_attn_with_kvcache(q1, k_cache, v_cache, cache_seqlens=torch.full_like(
        seqlens, n), causal=True, attention_chunk=C)
    check("chunked decode o", step,
          reference(q1, k_cache[:, :n], v_cache[:, :n], causal=True, chunk=C), tol)


if __name__ == "__main__":
    main()
