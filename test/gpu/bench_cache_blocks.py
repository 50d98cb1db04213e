"""The one-program cache kernels at head dim 256 over pages that 64 does not divide: their
64x64 blocks (which spill) against 64x32 (serving_checks.SMALL_PAGE_256_BLOCK_N: 0 spill), in
one process, fp16.

    PYTHONPATH=build/python python3 test/gpu/bench_cache_blocks.py [--json OUT.json]

Cases (H 16, Hkv 8, d256, Gemma's shape; K keys a sequence, causal): `chunk`
attention_with_kvcache with 8 sequences of 256 new queries each against its cache
(num_splits=1: kvcache_kernel); `mixed` attention_varlen(block_table=) over 4 prefill chunks
of 512 (varlen_cache_kernel). Timed per call (output allocation and the Python launch path
included); the ratio is 64x64's time over 64x32's (above 1: 64x32 faster). Without torch or
CUDA it prints why and exits 0.
"""
import argparse

import numpy as np

from bench_decode import cuda_torch, make_timer, save_report


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--keys", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--pages", type=int, nargs="+", default=[16, 32])
    args = ap.parse_args()
    torch = cuda_torch("bench_cache_blocks")
    if torch is None:
        return
    import tessel
    from tessel import serving_checks
    timed, how = make_timer(torch)
    H, Hkv, D = 16, 8, 256
    rows = []
    print(f"timing: {how}")
    print(f"{'case':6} {'page':>4} {'K':>6} {'64x64 ms':>9} {'64x32 ms':>9} {'ratio':>6}")
    for page in args.pages:
        for K in args.keys:
            B, Sq = 8, 256
            per = -(-K // page)
            table = torch.randperm(B * per, device="cuda").view(B, per).to(torch.int32)
            kc, vc = (torch.randn(B * per, page, Hkv, D, device="cuda").half() for _ in range(2))
            lens = torch.full((B,), K, dtype=torch.int32, device="cuda")
            q = torch.randn(B, Sq, H, D, device="cuda").half()
            nq = [512] * 4
            qv = torch.randn(sum(nq), H, D, device="cuda").half()
            cu = torch.tensor(np.concatenate([[0], np.cumsum(nq)]), dtype=torch.int32,
                              device="cuda")
            calls = {
                "chunk": lambda: tessel.attention_with_kvcache(
                    q, kc, vc, lens, block_table=table, causal=True, num_splits=1),
                "mixed": lambda: tessel.attention_varlen(
                    qv, kc, vc, cu, None, 512, K, causal=True, block_table=table[:4],
                    seqused_k=lens[:4]),
            }
            for name, call in calls.items():
                ms = {}
                for bn in (0, 32):
                    serving_checks.SMALL_PAGE_256_BLOCK_N = bn
                    ms[bn] = timed(call)
                serving_checks.SMALL_PAGE_256_BLOCK_N = 0
                rows.append(dict(case=name, page=page, keys=K, ms_64x64=ms[0], ms_64x32=ms[32]))
                print(f"{name:6} {page:4} {K:6} {ms[0]:9.3f} {ms[32]:9.3f} "
                      f"{ms[0] / ms[32]:6.2f}", flush=True)
    save_report(args.json, {"timing": how, "rows": rows})


if __name__ == "__main__":
    main()
