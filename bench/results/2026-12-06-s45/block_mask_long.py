"""tessel.block_mask against FlexAttention's create_block_mask on long single sequences (a ring
step's shard pair, a long-context document mask): B 1, 128x128 blocks, medians of
triton.testing.do_bench, ms. Run from the repository root with the bundle's environment."""
import sys
import torch
import triton
import tessel
from torch.nn.attention.flex_attention import create_block_mask

for N in [int(x) for x in (sys.argv[1:] or ["8192", "32768", "131072"])]:
    doc = torch.sort(torch.randint(0, 16, (1, N), device="cuda", dtype=torch.int32)).values

    def document(b, h, q_idx, kv_idx):
        return (doc[b, q_idx] == doc[b, kv_idx]) & (q_idx >= kv_idx)

    def window(b, h, q_idx, kv_idx):
        return (q_idx - kv_idx < 4096) & (q_idx >= kv_idx)
    q = torch.empty(1, 1, N, 128, device="cuda", dtype=torch.float16)
    for name, mod in (("document", document), ("window", window)):
        t = triton.testing.do_bench(lambda: tessel.block_mask(mod, 1, None, N, N, like=q))
        bm = tessel.block_mask(mod, 1, None, N, N, like=q)
        line = f"N {N:7d} {name:9s} tessel.block_mask {t:8.3f} ms"
        try:       # create_block_mask holds the N x N mask: out of memory at 128k on an H100
            f = triton.testing.do_bench(
                lambda: create_block_mask(mod, 1, None, N, N, device="cuda"))
            fb = create_block_mask(mod, 1, None, N, N, device="cuda")
            same = torch.equal(bm.kv_num_blocks.cpu(), fb.kv_num_blocks.int().cpu()) and \
                torch.equal(bm.full_kv_num_blocks.cpu(), fb.full_kv_num_blocks.int().cpu())
            line += f"  create_block_mask {f:8.3f} ms  ratio {f / t:5.2f}  same counts {same}"
        except torch.OutOfMemoryError:
            line += "  create_block_mask: out of memory"
        torch.cuda.empty_cache()
        print(line, flush=True)
