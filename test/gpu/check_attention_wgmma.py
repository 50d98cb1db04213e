"""The sm_90a wgmma path (convert-tile-to-mma with wgmma, --codegen=wgmma) on the H200:
correctness against float64 and the interpreter, then speed beside the mma.sync path and PyTorch
SDPA (FA2, cuDNN) in the same process. Run on the GPU machine:
python3 check_attention_wgmma.py --tessel-run BIN --json OUT.json [--budget-s 250] [--overlap]

With --overlap the correctness cases run with --wgmma-overlap (FA3's intra-warpgroup
pipelining, docs/dev/codegen-wgmma.md) and the speed rows time each wgmma block with and
without it (columns *_ov), instead of the mma.sync column.

Cases run through run_case of attention_case.py (the naive kernel of
test/python/attention_kernels.py, tile-optimize inside tessel-run, outputs poisoned first).
Each tessel-run is capped at 90 s (a hung kernel fails its case instead of the whole check), and
the check stops starting new cases past --budget-s so that what it has is printed and saved.
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

here = pathlib.Path(__file__).resolve().parent
for extra in (here, here.parents[0] / "python"):
    sys.path.insert(0, str(extra))
from attention_case import case_line, run_case, sdpa_tflops  # noqa: E402

_run = subprocess.run


def _capped_run(*args, **kwargs):
    kwargs["timeout"] = min(kwargs.get("timeout", 90), 90)
    try:
        return _run(*args, **kwargs)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args[0], 124, "", "timed out after 90 s")


subprocess.run = _capped_run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessel-run", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--budget-s", type=float, default=250)
    ap.add_argument("--overlap", action="store_true")
    opts = ap.parse_args()
    extra = ("--wgmma-overlap",) if opts.overlap else ()
    start = time.time()
    left = lambda: opts.budget_s - (time.time() - start)  # noqa: E731
    results = {"correctness": [], "interpreter": [], "speed": [], "skipped": 0}
    failures = 0
    save = lambda: pathlib.Path(opts.json).write_text(json.dumps(results, indent=1))  # noqa: E731
    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        # (dtype, mask, B, H, Hkv, nq, nk, D, bm, bn)
        cases = []
        for dtype in ("f16", "bf16"):
            for mask in ("none", "causal"):
                cases.append((dtype, mask, 1, 2, 2, 1000, 1000, 64, 64, 64))
                cases.append((dtype, mask, 1, 2, 2, 1000, 1000, 128, 128, 64))
        cases += [("f16", "causal", 1, 4, 2, 17, 33, 64, 64, 64),
                  ("bf16", "none", 1, 2, 1, 129, 200, 128, 128, 64),
                  ("f16", "window", 2, 4, 1, 300, 257, 64, 128, 64),
                  ("f16", "none", 1, 2, 2, 4096, 4096, 128, 128, 64),
                  # d128 without a mask: tessel.attention's 128x128 (GPU_BLOCKS_UNMASKED)
                  ("f16", "none", 1, 2, 2, 1000, 1000, 128, 128, 128),
                  ("bf16", "none", 1, 4, 2, 129, 300, 128, 128, 128),
                  ("f16", "causal", 1, 2, 2, 4096, 4096, 128, 128, 64),
                  ("bf16", "causal", 1, 2, 2, 4096, 4096, 64, 64, 64),
                  ("f16", "none", 1, 2, 2, 4096, 4096, 64, 128, 64),
                  ("bf16", "none", 1, 2, 2, 4096, 4096, 128, 64, 64),
                  ("f16", "causal", 1, 2, 2, 1000, 1000, 64, 64, 128),
                  ("bf16", "none", 1, 2, 1, 4096, 4096, 64, 64, 128),
                  # scales that are not positive and finite: the exact side of the scale branch
                  ("f16", "causal", 1, 2, 1, 129, 200, 64, 64, 64, -0.25),
                  ("bf16", "none", 1, 2, 2, 300, 257, 128, 64, 64, 0.0),
                  # fully masked rows (0, lse -inf), one key, one block
                  ("f16", "window", 1, 2, 2, 300, 100, 128, 64, 64),
                  ("bf16", "window", 1, 2, 2, 200, 40, 64, 128, 64),
                  ("f16", "none", 1, 2, 2, 70, 1, 128, 64, 64),
                  ("bf16", "causal", 1, 2, 2, 64, 64, 128, 64, 64)]
        for dtype, mask, B, H, Hkv, nq, nk, D, bm, bn, *scale in cases:
            scale = scale[0] if scale else None
            if left() < 150:
                results["skipped"] += 1
                continue
            r = run_case(opts.tessel_run, tmp, dtype, mask, B, H, Hkv, nq,
                                             nk, D, bm, bn, codegen="wgmma", scale=scale,
                                             extra=extra)
            r.update(dtype=dtype, mask=mask, nq=nq, nk=nk, d=D, bm=bm, bn=bn, scale=scale)
            results["correctness"].append(r)
            failures += not r["ok"]
            print(case_line(r, wall=True), flush=True)
        save()
        for dtype, mask, D, bm in (("f16", "causal", 64, 64), ("bf16", "none", 128, 128)):
            if left() < 140:
                results["skipped"] += 1
                continue
            r = run_case(opts.tessel_run, tmp, dtype, mask, 1, 2, 1, 90, 130,
                                             D, bm, 64, codegen="wgmma", device="both",
                                             extra=extra)
            r.update(dtype=dtype, mask=mask, d=D, bm=bm)
            results["interpreter"].append(r)
            failures += not r["ok"]
            print(f"gpu vs interpreter {dtype} {mask} d={D} {bm}x64: "
                  f"{r.get('compare', r.get('stderr', '')[-300:])}", flush=True)
        save()
        # Speed: b·n = 16384 tokens, h·d = 2048 (as bench/anchors.md), fp16; wgmma 128x64 and
        # 64x64 (and 64x128 at d64) beside mma 128x64 (the mma path's best block) and SDPA.
        for D, N, causal in ((128, 4096, False), (128, 16384, False), (128, 4096, True),
                             (128, 16384, True), (64, 4096, False), (64, 16384, False),
                             (64, 16384, True)):
            B, H = 16384 // N, 2048 // D
            flops = 4 * B * H * N * N * D / (2 if causal else 1)
            row = {"b": B, "h": H, "n": N, "d": D, "causal": causal}
            configs = [("wgmma_128", "wgmma", 128, 64), ("wgmma_64", "wgmma", 64, 64)]
            if D == 64:
                configs.append(("wgmma_64x128", "wgmma", 64, 128))
            if opts.overlap:
                configs = [c for base in configs for c in (base, (base[0] + "_ov",) + base[1:])]
            else:
                configs.append(("mma_128", "mma", 128, 64))
            for name, codegen, bm, bn in configs:
                if left() < 12:
                    results["skipped"] += 1
                    continue
                r = run_case(opts.tessel_run, tmp, "f16",
                                                 "causal" if causal else "none", B, H, H, N, N,
                                                 D, bm, bn, codegen=codegen, repeats=20,
                                                 reference=False,
                                                 extra=extra if name.endswith("_ov") else ())
                if r.get("median_ms"):
                    r["tflops"] = flops / (r["median_ms"] * 1e-3) / 1e12
                row[name] = r
            if left() > 8:
                row["sdpa"] = sdpa_tflops(B, H, N, D, causal, flops, backends=("flash", "cudnn"),
                                          repeats=20)
            results["speed"].append(row)
            cell = lambda x: f"{x['tflops']:.1f}" if x and "tflops" in x else "—"  # noqa: E731
            s = row.get("sdpa", {})
            print(f"speed d={D} n={N} causal={causal}: wgmma128 {cell(row.get('wgmma_128'))} "
                  f"wgmma64 {cell(row.get('wgmma_64'))} wgmma64x128 {cell(row.get('wgmma_64x128'))} "
                  f"mma128 {cell(row.get('mma_128'))} "
                  + (f"ov128 {cell(row.get('wgmma_128_ov'))} ov64 {cell(row.get('wgmma_64_ov'))} "
                     f"ov64x128 {cell(row.get('wgmma_64x128_ov'))} " if opts.overlap else "")
                  + f"FA2 {cell(s.get('flash'))} cuDNN {cell(s.get('cudnn'))}"
                  + ("" if "tflops" in row.get("wgmma_128", {}) else
                     f"  {row.get('wgmma_128', {}).get('stderr', '')[-300:]}"), flush=True)
            save()
    save()
    ov = ["wgmma_128_ov", "wgmma_64_ov", "wgmma_64x128_ov"] if opts.overlap else []
    print("\n| d | n | causal | wgmma 128x64 | wgmma 64x64 | wgmma 64x128 | mma 128x64 | FA2 | "
          "cuDNN |" + "".join(f" {c} |" for c in ov))
    print("|---|---|---|---|---|---|---|---|---|" + "---|" * len(ov))
    for row in results["speed"]:
        cell = lambda x: f"{x['tflops']:.1f}" if x and "tflops" in x else "—"  # noqa: E731
        s = row.get("sdpa", {})
        print(f"| {row['d']} | {row['n']} | {'yes' if row['causal'] else 'no'} | "
              f"{cell(row.get('wgmma_128'))} | {cell(row.get('wgmma_64'))} | "
              f"{cell(row.get('wgmma_64x128'))} | "
              f"{cell(row.get('mma_128'))} | {cell(s.get('flash'))} | {cell(s.get('cudnn'))} |"
              + "".join(f" {cell(row.get(c))} |" for c in ov))
    n = len(results["correctness"]) + len(results["interpreter"])
    print(f"\n{n - failures} passed, {failures} failed (GPU correctness, wgmma path); "
          f"{results['skipped']} skipped for time; {time.time() - start:.0f} s")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
