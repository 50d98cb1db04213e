"""negscale.py found it is not the scale: tessel.attention at d64 with 64x64 blocks over whole key
blocks (EVEN_N, one key loop; attention_kernel, sm_90a) is wrong whatever the scale's sign. One
case per process under the GpuOptions of argv[1] (FIELD=VALUE[,...], as TESSEL_TEST_GPU_OPTIONS):
its error against float64 and what its PTX holds."""
import os
import sys

if len(sys.argv) > 1 and sys.argv[1]:
    os.environ["TESSEL_TEST_GPU_OPTIONS"] = sys.argv[1]
sys.path.insert(0, "test/gpu")
import bench_decode  # noqa: E402,F401  (applies TESSEL_TEST_GPU_OPTIONS)
import torch  # noqa: E402
import tessel  # noqa: E402


def check(D, Nq, Nk, bm, bn, dtype=torch.float16):
    g = torch.Generator(device="cuda").manual_seed(1)
    q = torch.randn(1, 2, Nq, D, device="cuda", generator=g).to(dtype)
    k, v = (torch.randn(1, 2, Nk, D, device="cuda", generator=g).to(dtype) for _ in range(2))
    o = tessel.attention(q, k, v, block_m=bm, block_n=bn)
    s = q.double() @ k.double().transpose(-1, -2) / D ** 0.5
    ro = torch.softmax(s, -1) @ v.double()
    return ((o.double() - ro).abs().max() / ro.abs().max()).item()


cases = [(64, 256, 256, 64, 64), (64, 256, 128, 64, 64), (64, 256, 64, 64, 64),
         (64, 256, 192, 64, 64), (64, 256, 256, 128, 64), (128, 256, 256, 64, 64),
         (64, 256, 256, 64, 32), (64, 256, 250, 64, 64)]
print(sys.argv[1:] or "default", " ".join(f"{c[0]}/{c[2]}/{c[3]}x{c[4]}:{check(*c):.1e}"
                                          for c in cases), "bf16:",
      f"{check(64, 256, 256, 64, 64, torch.bfloat16):.1e}", flush=True)
