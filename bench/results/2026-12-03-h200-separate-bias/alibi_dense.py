"""ALiBi on the dense causal kernel (128x128 from CAUSAL_LONG keys) beside plain causal, one process."""
import torch, tessel, triton
from tessel import language as tl
B, H, N, D = 4, 16, 8192, 128
g = torch.Generator(device="cuda").manual_seed(0)
q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16, generator=g) for _ in range(3))
slopes = torch.tensor([2.0 ** (-8.0 * (i + 1) / H) for i in range(H)], device="cuda")
def alibi(score, b, h, q_idx, kv_idx):
    return score + slopes[h] * (kv_idx - q_idx)
flops = 4 * B * H * N * N * D / 2
for name, kw in (("causal", {}), ("causal+alibi", {"score_mod": alibi})):
    f = lambda: tessel.attention(q, k, v, causal=True, **kw)
    f(); ms = triton.testing.do_bench(f, return_mode="median")
    print(f"{name:>14} {flops / ms / 1e9:7.1f} TFLOP/s {ms:.3f} ms")
