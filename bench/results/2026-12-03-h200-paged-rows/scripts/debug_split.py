"""Which keys does the split-KV kernel see through a paged view? q = 0 makes every visible key
weigh the same, so exp(lse) counts the keys and o[..., 0] is the mean of v[..., 0] = the key's
position: a wrong page, a missing or doubled key shows in both."""
import sys
import torch
import tessel
from tessel import serving_decode

torch.manual_seed(0)
B, H, Hkv, D = 2, 32, 8, 128
lengths = [3000, 17]
dev = "cuda"
for page, bn in [(16, 64), (16, 16), (64, 64), (32, 64), (7, 64)]:
    max_pages = -(-max(lengths) // page)
    num_pages = B * max_pages + 3
    table = torch.randperm(num_pages, device=dev)[:B * max_pages].view(B, max_pages).int()
    kp = torch.randn(num_pages, page, Hkv, D, device=dev, dtype=torch.float16)
    vp = torch.zeros(num_pages, page, Hkv, D, device=dev, dtype=torch.float16)
    for b in range(B):
        for j in range(lengths[b]):
            vp[table[b, j // page], j % page, :, 0] = float(j) / 64
            vp[table[b, j // page], j % page, :, 1] = 1.0
    q = torch.zeros(B, 1, H, D, device=dev, dtype=torch.float16)
    seqlens = torch.tensor(lengths, dtype=torch.int32, device=dev)
    for splits in [1, 2, 4, 16]:
        try:
            o, lse = tessel.attention_with_kvcache(q, kp, vp, seqlens, block_table=table,
                                                   num_splits=splits, block_n=bn, return_lse=True)
        except Exception as e:  # noqa: BLE001
            print(page, bn, splits, "error", str(e)[:200])
            continue
        torch.cuda.synchronize()
        for b in range(B):
            n = lengths[b]
            count = float(lse[b, 0, 0].exp())
            mean = float(o[b, 0, 0, 0]) * 64
            ones = float(o[b, 0, 0, 1])
            print(f"page {page} bn {bn} splits {splits} b {b}: keys {count:.1f} (want {n}), "
                  f"mean position {mean:.1f} (want {(n - 1) / 2:.1f}), weight {ones:.3f}, "
                  f"heads agree {bool((o[b, 0] - o[b, 0, :1]).abs().max() < 1e-3)}",
                  flush=True)
