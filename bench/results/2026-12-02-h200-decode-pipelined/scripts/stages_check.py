"""Outputs with every tessel kernel compiled at N stages (argv[1]) against float32 references:
a paged decode (per-block page lookups, 4 splits) and block-sparse attention (a document mask
through tessel.block_mask: an indirect key loop). Prints the largest errors.

    python3 stages_check.py 3      # tessel importable (PYTHONPATH); run from the repo root
"""
import pathlib, sys
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[4] / "test" / "gpu"))
import torch
from bench_decode import compile_with
compile_with(num_stages=int(sys.argv[1]))
import tessel

g = torch.Generator(device="cuda").manual_seed(0)
B, H, Hkv, D, nk, page = 4, 32, 8, 128, 4096, 256
q = torch.randn(B, 1, H, D, device="cuda", dtype=torch.float16, generator=g)
kc = torch.randn(B, nk, Hkv, D, device="cuda", dtype=torch.float16, generator=g)
vc = torch.randn(B, nk, Hkv, D, device="cuda", dtype=torch.float16, generator=g)
sl = torch.tensor([nk, 1000, 4000, 77], dtype=torch.int32, device="cuda")
pages = nk // page
table = torch.randperm(B * pages, device="cuda", generator=g).view(B, pages).int()
kp = torch.empty(B * pages, page, Hkv, D, device="cuda", dtype=torch.float16)
vp = torch.empty_like(kp)
for b in range(B):
    for p in range(pages):
        kp[table[b, p]] = kc[b, p * page:(p + 1) * page]
        vp[table[b, p]] = vc[b, p * page:(p + 1) * page]
worst = 0.0
for b in range(B):
    n = int(sl[b])
    ref = torch.nn.functional.scaled_dot_product_attention(
        q[b].transpose(0, 1).float(), kc[b, :n].transpose(0, 1).float().repeat_interleave(4, 0),
        vc[b, :n].transpose(0, 1).float().repeat_interleave(4, 0)).transpose(0, 1)
    for name, o in (("contiguous", tessel.attention_with_kvcache(q, kc, vc, sl, num_splits=4)),
                    ("paged", tessel.attention_with_kvcache(q, kp, vp, sl, block_table=table,
                                                             num_splits=4))):
        err = (o[b].float() - ref).abs().max().item()
        worst = max(worst, err)
        print(f"stages {sys.argv[1]} decode {name} b={b} n={n}: max err {err:.2e}")
N = 2048
qa, ka, va = (torch.randn(2, 8, N, 128, device="cuda", dtype=torch.float16, generator=g)
              for _ in range(3))


def doc(b, h, q_idx, kv_idx):
    return (q_idx // 300) == (kv_idx // 300)


bm = tessel.block_mask(doc, None, None, N, N, BLOCK_M=128, BLOCK_N=128, device="cuda")
o = tessel.attention(qa, ka, va, mask_mod=doc, block_mask=bm)
i = torch.arange(N, device="cuda")
mask = (i[:, None] // 300) == (i[None, :] // 300)
ref = torch.nn.functional.scaled_dot_product_attention(qa.float(), ka.float(), va.float(),
                                                       attn_mask=mask)
err = (o.float() - ref).abs().max().item()
print(f"stages {sys.argv[1]} block mask (document of 300): max err {err:.2e}")
sys.exit(0 if max(worst, err) < 1e-2 else 1)
