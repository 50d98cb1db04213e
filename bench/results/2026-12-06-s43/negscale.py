"""The CUDA fuzzer's one failure of the forty-third session (next1.sh): tessel.attention at
D 64, B2 H4 Hkv2, Nq 1500, Nk 1024, block_n 64, scale -0.2, fp16 — o 0.95 off float64. This
runs that case and its neighbours (scale sign, block_n, lengths, persistent or not, GpuOptions
switches from argv as FIELD=VALUE) and prints each one's error and constexprs."""
import importlib
import sys

import torch

sys.path.insert(0, "test/gpu")
import bench_decode  # noqa: E402  (TESSEL_TEST_GPU_OPTIONS)
import tessel  # noqa: E402

attn = importlib.import_module("tessel.attention")


def ref(q, k, v, scale):
    k = k.double().repeat_interleave(q.shape[1] // k.shape[1], 1)
    v = v.double().repeat_interleave(q.shape[1] // v.shape[1], 1)
    s = q.double() @ k.transpose(-1, -2) * scale
    return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)


def run(D, Nq, Nk, scale, block_n, block_m=None, causal=False):
    g = torch.Generator(device="cuda").manual_seed(1)
    q = torch.randn(2, 4, Nq, D, device="cuda", generator=g).half()
    k, v = (torch.randn(2, 2, Nk, D, device="cuda", generator=g).half() for _ in range(2))
    o, lse = tessel.attention(q, k, v, scale=scale, enable_gqa=True, block_n=block_n,
                              block_m=block_m, causal=causal, return_lse=True)
    ro, rl = ref(q, k, v, scale)
    if causal:
        return "(causal: no reference here)"
    _, cx, grid, *_, kernel = attn._prepare_cuda(q, k, v, causal, scale, None, None, True, block_m,
                                         block_n)
    keys = ("BLOCK_M", "BLOCK_N", "EVEN_N", "DIAGONAL_FIRST", "TAIL_FIRST")
    e = ((o.double() - ro).abs().max() / ro.abs().max()).item()
    el = (lse.double() - rl).abs().max().item()
    return f"o {e:.2e} lse {el:.2e} {[cx.get(x) for x in keys]} grid {grid} {kernel.__name__}"


for case in [(64, 1500, 1024, -0.2, 64), (64, 1500, 1024, 0.2, 64), (64, 1500, 1024, -0.2, None),
             (64, 1500, 1000, -0.2, 64), (64, 1024, 1024, -0.2, 64), (64, 1500, 1024, -0.2, 128),
             (128, 1500, 1024, -0.2, 64), (128, 1500, 1024, -0.2, None),
             (64, 1500, 1024, 0.0, 64), (64, 300, 1024, -0.2, 64), (64, 1500, 4096, -0.2, None),
             (128, 4096, 4096, -0.2, None), (256, 1500, 1024, -0.2, None)]:
    try:
        print(case, run(*case), flush=True)
    except Exception as ex:  # noqa: BLE001
        print(case, "raised", type(ex).__name__, str(ex)[:200], flush=True)
print("persistent off:", flush=True)
bench_decode.set_persistent(False)
for case in [(64, 1500, 1024, -0.2, 64), (64, 1500, 1024, -0.2, None)]:
    print(case, run(*case), flush=True)
