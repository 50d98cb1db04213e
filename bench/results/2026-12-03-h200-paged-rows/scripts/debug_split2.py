"""Per-split partials of the split-KV kernel through a paged view (q = 0: exp(lse_s) counts
the keys split s sees, o_s[..., 0] * 64 their mean position, o_s[..., 1] the share of real
keys). K random, then K = 0 (scores 0 whatever Q holds)."""
import torch
import tessel
from tessel import serving_decode

torch.manual_seed(0)
B, H, Hkv, D = 1, 8, 2, 128
n = 3000
dev = "cuda"
captured = []
empty = serving_decode._empty


def keep(q, shape):
    t = empty(q, shape)
    captured.append(t)
    return t


serving_decode._empty = keep
for page, kzero in [(16, False), (16, True), (64, False)]:
    max_pages = -(-n // page)
    num_pages = max_pages + 3
    table = torch.randperm(num_pages, device=dev)[:max_pages].view(1, max_pages).int()
    kp = torch.randn(num_pages, page, Hkv, D, device=dev, dtype=torch.float16)
    if kzero:
        kp.zero_()
    vp = torch.zeros(num_pages, page, Hkv, D, device=dev, dtype=torch.float16)
    for j in range(n):
        vp[table[0, j // page], j % page, :, 0] = float(j) / 64
        vp[table[0, j // page], j % page, :, 1] = 1.0
    q = torch.zeros(B, 1, H, D, device=dev, dtype=torch.float16)
    seqlens = torch.tensor([n], dtype=torch.int32, device=dev)
    for splits in [2, 4]:
        captured.clear()
        o, lse = tessel.attention_with_kvcache(q, kp, vp, seqlens, block_table=table,
                                               num_splits=splits, return_lse=True)
        torch.cuda.synchronize()
        part, part_lse = captured[0], captured[1]
        chunk = -(-(-(-n // splits)) // 64) * 64
        for s in range(splits):
            lo, hi = min(s * chunk, n), min(s * chunk + chunk, n)
            cnt = float(part_lse[s, 0, 0, 0].exp())
            print(f"page {page} kzero {kzero} splits {splits} split {s} [{lo}, {hi}): keys "
                  f"{cnt:.1f} (want {hi - lo}), mean {float(part[s, 0, 0, 0, 0]) * 64:.1f} "
                  f"(want {(lo + hi - 1) / 2:.1f}), real share {float(part[s, 0, 0, 0, 1]):.3f}",
                  flush=True)
