"""A FlexAttention training step moved to tessel by changing one call: flex_attention ->
tessel.flex_attention. Everything else is FlexAttention's own: create_block_mask, and_masks,
a document mask over a closure's ids, a tanh softcap written with torch.tanh, torch.compile.

Packed documents attend causally within their own document. Each step packs other documents,
as a training loop's batches do: new ids, a new and_masks mask and a new block mask (tessel
traces the mask once and reads each step's ids; under torch.compile one graph serves every
step). Each step's output and gradients are checked against float64 attention on the dense
mask.

    python3 examples/python/flex_drop_in.py            # CPU tensors: the interpreter
    python3 examples/python/flex_drop_in.py --cuda     # CUDA tensors (fp16)
    python3 examples/python/flex_drop_in.py --cuda --compile --steps 4
"""
import argparse

import _common  # noqa: F401 (finds tessel)
import torch
from torch.nn.attention.flex_attention import and_masks, create_block_mask

import tessel


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def document_mask(doc):                     # doc: [B, N] document ids
    def same_document(b, h, q_idx, kv_idx):
        return doc[b, q_idx] == doc[b, kv_idx]
    return same_document


def softcap(score, b, h, q_idx, kv_idx):
    return 20.0 * torch.tanh(score / 20.0)


def reference(q, k, v, keep):
    """float64 attention with the softcap and the dense mask keep [B, 1, N, N]."""
    q, k, v = (x.detach().double().requires_grad_() for x in (q, k, v))
    s = softcap(q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5, None, None, None, None)
    o = torch.softmax(s.masked_fill(~keep, float("-inf")), -1) @ v
    return o, (q, k, v)


def packed_documents(B, N, gen, dev):
    """[B, N] document ids: three documents of random lengths a row."""
    cuts = torch.sort(torch.randint(1, N, (B, 2), device=dev, generator=gen), dim=1).values
    pos = torch.arange(N, device=dev)
    return ((pos[None, :] >= cuts[:, :1]).int() + (pos[None, :] >= cuts[:, 1:]).int())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cuda", action="store_true", help="run on the GPU (fp16)")
    ap.add_argument("--compile", action="store_true", help="the step under torch.compile")
    ap.add_argument("--steps", type=int, default=2, help="batches, each of other documents")
    args = ap.parse_args()
    dev, dt = ("cuda", torch.float16) if args.cuda else ("cpu", torch.float32)
    B, H, N, D = (2, 8, 2048, 64) if args.cuda else (2, 2, 256, 16)
    gen = torch.Generator(device=dev).manual_seed(0)

    def step(q, k, v, block_mask):
        return tessel.flex_attention(q, k, v, score_mod=softcap, block_mask=block_mask)

    if args.compile:
        step = torch.compile(step)
    for i in range(args.steps):
        doc = packed_documents(B, N, gen, dev)
        mask = and_masks(causal, document_mask(doc))
        block_mask = create_block_mask(mask, B, None, N, N, device=dev)
        q, k, v = (torch.randn(B, H, N, D, device=dev, dtype=dt, generator=gen)
                   .requires_grad_() for _ in range(3))
        o = step(q, k, v, block_mask)
        do = torch.randn(o.shape, device=dev, dtype=dt, generator=gen)
        grads = torch.autograd.grad(o, (q, k, v), do)

        keep = (doc[:, :, None] == doc[:, None, :]) & torch.ones(N, N, dtype=torch.bool,
                                                                 device=dev).tril()
        ref, leaves = reference(q, k, v, keep[:, None])
        ref_grads = torch.autograd.grad(ref, leaves, do.double())
        for name, a, r in zip(("o", "dq", "dk", "dv"), (o, *grads), (ref, *ref_grads)):
            err = ((a.double() - r).abs().max() / r.abs().max()).item()
            print(f"flex_drop_in: step {i} {name} max error vs float64 {err:.2e}")
            assert err < (2e-2 if args.cuda else 1e-5), name


if __name__ == "__main__":
    main()
