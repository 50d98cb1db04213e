"""Decode at 1k keys (b = 8, 32 query heads, 8 KV heads, d128, fp16): tessel at each
num_splits x block_n beside cuDNN, GB/s of K and V read (do_bench median, cuDNN timed before
and after, the better kept); JSON to $OUT/decode_1k_sweep.json.

    OUT=. python3 decode_1k_sweep.py [nk]      # tessel importable (PYTHONPATH)
"""
import json, os, pathlib, sys
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[4] / "test" / "gpu"))
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import tessel
from bench_decode import make_timer, warm_up

nk = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
B, H, Hkv, D = 8, 32, 8, 128
nbytes = 2 * B * nk * Hkv * D * 2
timed, _ = make_timer(torch)          # do_bench median
warm_up(torch)
q = torch.randn(B, 1, H, D, device="cuda", dtype=torch.float16)
kc = torch.randn(B, nk, Hkv, D, device="cuda", dtype=torch.float16)
vc = torch.randn(B, nk, Hkv, D, device="cuda", dtype=torch.float16)
sl = torch.full((B,), nk, dtype=torch.int32, device="cuda")
qs, ks, vs = q.permute(0, 2, 1, 3).contiguous(), kc.permute(0, 2, 1, 3).contiguous(), \
    vc.permute(0, 2, 1, 3).contiguous()


def cudnn():
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        return torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, enable_gqa=True)


ref = cudnn().permute(0, 2, 1, 3).float()
rows = []
first = timed(cudnn)
for n in (None, 1, 2, 3, 4, 6, 8, 16):
    for bn in (None, 32, 64):
        f = lambda n=n, bn=bn: tessel.attention_with_kvcache(q, kc, vc, sl, num_splits=n,
                                                             block_n=bn)
        err = float((f().float() - ref).abs().max())
        ms = timed(f)
        rows.append(dict(num_splits=n, block_n=bn, ms=ms, gbps=nbytes / ms / 1e6, err=err))
        print(f"nk {nk} splits {n} block_n {bn}: {nbytes / ms / 1e6:,.0f} GB/s err {err:.1e}",
              flush=True)
last = timed(cudnn)
c = min(first, last)
print(f"cuDNN {nbytes / first / 1e6:,.0f} / {nbytes / last / 1e6:,.0f} GB/s", flush=True)
json.dump(dict(nk=nk, cudnn_ms=[first, last], cudnn_gbps=nbytes / c / 1e6, rows=rows),
          open(os.path.join(os.environ.get("OUT", "."), "decode_1k_sweep.json"), "w"), indent=1)
