"""Correctness of d64's three-warpgroup blocks before they can become defaults (twenty-fourth
session): 192x128 and 192x64, persistent and warp-specialized (grid.PERSISTENT_BLOCKS), against
s23's float32 reference on fresh random inputs: fp16 and bf16, causal and not, GQA, lengths not
a multiple of the block (1000 rows: the last tile has 40). `N passed, M failed`."""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "../2026-12-04-h200-s23"))
from check_blocks import TOL, reference  # noqa: E402

import tessel  # noqa: E402
from tessel import grid  # noqa: E402


def main():
    grid.PERSISTENT_BLOCKS = grid.PERSISTENT_BLOCKS | {("sm_90a", 192, 128), ("sm_90a", 192, 64)}
    gen = torch.Generator(device="cuda").manual_seed(24)
    passed = failed = 0
    for bm, bn in ((192, 128), (192, 64)):
        for dt in (torch.float16, torch.bfloat16):
            for causal in (False, True):
                for B, H, Hkv, Nq, Nk in ((2, 4, 4, 1024, 1024), (1, 4, 2, 1000, 1000),
                                          (1, 2, 2, 4096, 4096), (1, 3, 3, 129, 700),
                                          (3, 2, 1, 200, 200)):
                    if causal and Nq > Nk:
                        continue
                    q = torch.randn(B, H, Nq, 64, device="cuda", generator=gen).to(dt)
                    k = torch.randn(B, Hkv, Nk, 64, device="cuda", generator=gen).to(dt)
                    v = torch.randn(B, Hkv, Nk, 64, device="cuda", generator=gen).to(dt)
                    got = tessel.attention(q, k, v, causal=causal, enable_gqa=H != Hkv,
                                           block_m=bm, block_n=bn)
                    want = reference(q, k, v, causal)
                    err = ((got.float() - want).abs().max() / want.abs().max()).item()
                    ok = err <= TOL[dt] and bool(torch.isfinite(got).all())
                    passed += ok
                    failed += not ok
                    print(f"d64 {bm}x{bn} {str(dt)[6:]} causal={causal} B{B} H{H}/{Hkv} "
                          f"{Nq}x{Nk}: rel err {err:.2e} {'ok' if ok else 'FAILED'}", flush=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
