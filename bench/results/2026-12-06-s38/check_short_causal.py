"""d128 causal from 1024 to 2047 keys (128x128 since s38's CAUSAL_LONG_KEYS; 64x64 before):
tessel.attention's default against float32 SDPA on fresh random inputs, fp16 and bf16, the
bound twice the error of SDPA in the input dtype plus 1e-3. Also Nq < Nk and GQA."""
import torch
import tessel

gen = torch.Generator(device="cuda").manual_seed(1024)
fails = 0
for dt in (torch.float16, torch.bfloat16):
    for nq, nk, hkv in ((1024, 1024, 8), (1000, 1000, 8), (1500, 1500, 2), (2047, 2047, 8),
                        (700, 1100, 8)):
        q = torch.randn(2, 8, nq, 128, device="cuda", dtype=dt, generator=gen)
        k, v = (torch.randn(2, hkv, nk, 128, device="cuda", dtype=dt, generator=gen)
                for _ in range(2))
        kk, vv = (x.repeat_interleave(8 // hkv, 1) for x in (k, v))
        mask = torch.ones(nq, nk, dtype=torch.bool, device="cuda").tril()   # top-left
        ref = torch.nn.functional.scaled_dot_product_attention(q.float(), kk.float(), vv.float(),
                                                               attn_mask=mask)
        low = torch.nn.functional.scaled_dot_product_attention(q, kk, vv, attn_mask=mask)
        bound = 2 * float((low.float() - ref).abs().max()) + 1e-3
        o = tessel.attention(q, k, v, causal=True, enable_gqa=hkv != 8)
        err = float((o.float() - ref).abs().max())
        fails += err > bound
        print(f"{dt} nq={nq} nk={nk} hkv={hkv} err {err:.2e} bound {bound:.2e} "
              f"{'PASS' if err <= bound else 'FAIL'}", flush=True)
print(f"{fails} failed")
