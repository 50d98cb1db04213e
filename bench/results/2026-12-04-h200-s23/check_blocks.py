"""Correctness of two block choices before they can become defaults (twenty-third session):
d64 at 128x128 (the persistent warp-specialized kernel, `block_m=128, block_n=128`) and d256
persistent at 128x64 (grid.PERSISTENT_BLOCKS plus ("sm_90a", 128, 64)), against a float32
reference on fresh random inputs: fp16 and bf16, causal and not, GQA, lengths not a multiple
of the block. Prints one line a case and `N passed, M failed`."""
import torch

import tessel
from tessel import grid

TOL = {torch.float16: 5e-3, torch.bfloat16: 2e-2}


def reference(q, k, v, causal):
    q, k, v = q.float(), k.float(), v.float()
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if causal:
        nq, nk = s.shape[-2:]
        keep = torch.ones(nq, nk, dtype=torch.bool, device=q.device).tril()   # top-left
        s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, dim=-1).nan_to_num(0.0) @ v


def main():
    grid.PERSISTENT_BLOCKS = grid.PERSISTENT_BLOCKS | {("sm_90a", 128, 64)}
    gen = torch.Generator(device="cuda").manual_seed(23)
    passed = failed = 0
    for D, blocks in ((64, dict(block_m=128, block_n=128)), (256, {})):
        for dt in (torch.float16, torch.bfloat16):
            for causal in (False, True):
                for B, H, Hkv, Nq, Nk in ((2, 4, 4, 1024, 1024), (1, 4, 2, 1000, 1000),
                                          (1, 2, 2, 4096, 4096), (1, 3, 3, 129, 700)):
                    if causal and Nq > Nk:
                        continue
                    q = torch.randn(B, H, Nq, D, device="cuda", generator=gen).to(dt)
                    k = torch.randn(B, Hkv, Nk, D, device="cuda", generator=gen).to(dt)
                    v = torch.randn(B, Hkv, Nk, D, device="cuda", generator=gen).to(dt)
                    got = tessel.attention(q, k, v, causal=causal, enable_gqa=H != Hkv,
                                           **blocks)
                    want = reference(q, k, v, causal)
                    err = ((got.float() - want).abs().max() / want.abs().max()).item()
                    ok = err <= TOL[dt] and bool(torch.isfinite(got).all())
                    passed += ok
                    failed += not ok
                    print(f"d{D} {str(dt)[6:]} causal={causal} B{B} H{H}/{Hkv} {Nq}x{Nk} "
                          f"{blocks or 'persistent 128x64'}: rel err {err:.2e} "
                          f"{'ok' if ok else 'FAILED'}", flush=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
