"""Lab script (twentieth session): ways to make FP8 V transposed ([B, H, N, D] -> [B, H, D, N']
bytes) with torch, timed with do_bench and checked against the plain transpose copy."""
import torch
from triton.testing import do_bench

B, H, N, D = 4, 16, 4096, 128
v = torch.randint(0, 256, (B, H, N, D), dtype=torch.uint8, device="cuda")
want = v.transpose(-1, -2).contiguous()


def plain():
    return v.transpose(-1, -2).contiguous()


def words_then_bytes():
    # int32 transpose (4x fewer elements), then each word's 4 bytes spread over 4 rows.
    x = v.view(torch.int32).transpose(-1, -2).contiguous()          # [B, H, D/4, N] words
    return x.view(torch.uint8).view(B, H, D // 4, N, 4).permute(0, 1, 2, 4, 3).reshape(B, H, D, N)


def via_int16_pairs():
    # keys paired into 16-bit words, then a 16-bit transpose
    x = v.view(B, H, N // 2, 2, D).permute(0, 1, 2, 4, 3).contiguous()   # [B,H,N/2,D,2]
    return x.view(torch.int16).view(B, H, N // 2, D).transpose(-1, -2).contiguous() \
        .view(torch.uint8).view(B, H, D, N)


for name, fn in (("plain", plain), ("words_then_bytes", words_then_bytes),
                 ("int16_pairs", via_int16_pairs)):
    out = fn()
    ok = torch.equal(out, want)
    print(f"{name:>18}: {do_bench(fn, warmup=25, rep=100, return_mode='median') * 1e3:8.1f} us  "
          f"{'ok' if ok else 'WRONG'}", flush=True)
