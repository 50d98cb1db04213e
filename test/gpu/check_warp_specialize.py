"""tessel.attention's default kernels (warp-specialized ones among them) vs float32 (H200).

    PYTHONPATH=build/python python3 test/gpu/check_warp_specialize.py [--json OUT.json]
        [--set overlap_consumers=False ...]

Since 2026-12-03 the kernels of 128 query rows (two consumer warpgroups: d128 unmasked, d128
causal from 2k keys, d256) take the warp-specialized schedule (tilegpu-warp-specialize: a
producer warpgroup copies K/V, mbarriers between it and the consumers); 64-row blocks do not.
Since the same day their consumers overlap each block's softmax with the previous block's P·V
(tilegpu-overlap-consumers: `wgmma.wait_group 1`) where registers allow: d128, and d256 at
its 128x64 blocks since 2026-12-04 (its overlapped kernel spilled before and fell back). First
checks both in their PTX (setmaxnreg, wait_group 1), then runs head dims 64/128/256, fp16/bf16,
causal or not, lengths that are and are not multiples of the blocks, Nq != Nk, GQA, on fresh
random inputs, against a float32 reference with test_python_gpu.py's tolerance. Prints one line
per case and exits 1 if any fails (a kernel of the wrong shape too, the cases run anyway);
without torch or CUDA it prints why and exits 0. `--set` compiles
with GpuOptions fields (overlap_consumers=False: synchronous consumers taking turns around the
softmax, cuDNN's schedule; the PTX check then expects no `wait_group 1`).
"""
import argparse
import sys

from bench_decode import compile_with, cuda_torch, parse_set, save_report

TOL = {"fp16": 5e-3, "bf16": 2e-2}


def reference(torch, q, k, v, causal):
    q, k, v = q.float(), k.float(), v.float()
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    s = torch.einsum("bhqd,bhkd->bhqk", q, k) / q.shape[-1] ** 0.5
    if causal:
        nq, nk = s.shape[-2:]
        keep = torch.ones(nq, nk, dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--set", nargs="*", default=[], help="GpuOptions FIELD=VALUE")
    args = ap.parse_args()
    torch = cuda_torch("check_warp_specialize")
    if torch is None:
        return 0
    fields = parse_set(args.set)
    if fields:
        compile_with(**fields)
    import numpy as np
    import tessel
    import tessel.cache

    # The kernels are warp-specialized where the default says so (128-row blocks, two consumer
    # warpgroups); 64-row blocks keep the pipelined copies (measured faster there). A kernel of
    # another shape fails the run; the numeric checks run anyway.
    shapes_failed = 0
    for D, BM, BN, causal, want, overlapped in (
            (128, 128, 128, False, True, True), (128, 128, 128, True, True, True),
            (256, 128, 64, False, True, True), (128, 64, 64, True, False, False),
            (64, 64, 128, False, False, False)):
        z = np.zeros((1, 1, 128, D), np.float16)
        binary = tessel.compile_attention(z, z, z, causal=causal, block_m=BM, block_n=BN).binary(
            tessel.cache.GpuOptions(chip="sm_90a"))
        ptx = binary.ptx
        if binary.manifest.get("given_up"):      # the spill fallbacks (lib/Target/Compile.cpp)
            print(f"d{D} {BM}x{BN} causal={causal}: compiled without "
                  f"{', '.join(binary.manifest['given_up'])} (ptxas spilled with them)")
        if ("setmaxnreg" in ptx) != want:
            print(f"d{D} {BM}x{BN} causal={causal}: warp-specialized {not want}, expected {want}")
            shapes_failed += 1
        overlapped = overlapped and fields.get("overlap_consumers", True)
        if ("wgmma.wait_group.sync.aligned 1" in ptx) != overlapped:
            print(f"d{D} {BM}x{BN} causal={causal}: consumers overlapped {not overlapped}, "
                  f"expected {overlapped}")
            shapes_failed += 1
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1)
    dts = {"fp16": torch.float16, "bf16": torch.bfloat16}
    cases = []
    for D in (64, 128, 256):
        for dt in ("fp16", "bf16"):
            for causal in (False, True):
                # 100 keys: the unmasked loop of a 128-key block runs no iteration (the
                # overlapped consumers' drain keeps O).
                for (B, H, Hkv, Nq, Nk) in ((2, 4, 4, 1024, 1024), (1, 3, 3, 1000, 1000),
                                            (1, 2, 2, 17, 300), (1, 4, 2, 513, 4097),
                                            (1, 2, 2, 4096, 4096), (2, 2, 2, 100, 100)):
                    if causal and Nq > Nk:
                        continue
                    cases.append((D, dt, causal, B, H, Hkv, Nq, Nk))
    failed = 0
    rows = []
    for D, dt, causal, B, H, Hkv, Nq, Nk in cases:
        q = torch.randn(B, H, Nq, D, device="cuda", generator=gen).to(dts[dt])
        k = torch.randn(B, Hkv, Nk, D, device="cuda", generator=gen).to(dts[dt])
        v = torch.randn(B, Hkv, Nk, D, device="cuda", generator=gen).to(dts[dt])
        got = tessel.attention(q, k, v, causal=causal, enable_gqa=Hkv != H)
        torch.cuda.synchronize()
        want = reference(torch, q, k, v, causal)
        err = ((got.float() - want).abs().max() / want.abs().max().clamp_min(1e-6)).item()
        ok = err <= TOL[dt] and bool(torch.isfinite(got).all())
        failed += not ok
        rows.append(dict(d=D, dtype=dt, causal=causal, b=B, h=H, hkv=Hkv, nq=Nq, nk=Nk,
                         rel_err=err, ok=ok))
        print(f"d{D:<3} {dt} causal={causal!s:<5} B{B} H{H}/{Hkv} {Nq}x{Nk}: rel err {err:.2e} "
              f"{'ok' if ok else 'FAILED'}", flush=True)
    if shapes_failed:
        print(f"{shapes_failed} kernel(s) not of the expected shape (above)")
    print(f"{len(cases) - failed} passed, {failed} failed")
    save_report(args.json, rows)
    return 1 if failed or shapes_failed else 0


if __name__ == "__main__":
    sys.exit(main())
