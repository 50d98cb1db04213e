"""d256 with 80-key blocks (FlashAttention-3's d256 non-causal shape, 128x80) against the
default 128x64: the output against float32 SDPA on fresh random inputs, at whole and ragged
key counts, causal and not. Prints one line a case: max error of each, the bound."""
import torch
import tessel

gen = torch.Generator(device="cuda").manual_seed(38)
for n, causal in ((4096, False), (4000, False), (1000, False), (4096, True), (999, True)):
    q, k, v = (torch.randn(2, 4, n, 256, device="cuda", dtype=torch.float16, generator=gen)
               for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                           is_causal=causal)
    low = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    bound = 2 * float((low.float() - ref).abs().max()) + 1e-3
    errs = []
    for bn in (64, 80):
        o = tessel.attention(q, k, v, causal=causal, block_m=128, block_n=bn)
        errs.append(float((o.float() - ref).abs().max()))
    ok = all(e <= bound for e in errs)
    print(f"n={n} causal={causal} err 128x64 {errs[0]:.2e} 128x80 {errs[1]:.2e} bound {bound:.2e}"
          f" {'PASS' if ok else 'FAIL'}", flush=True)
