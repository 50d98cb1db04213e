"""The mma.sync fast path (convert-tile-to-mma) on the GPU: correctness against float64 and the
interpreter, then speed beside PyTorch SDPA (FA2, cuDNN) in the same process. Run on the GPU
machine: python3 check_attention_mma.py --tessel-run BIN --json OUT.json

Every case: the naive kernel of test/python/attention_kernels.py, made streamed by tile-optimize
inside tessel-run, compiled with --codegen=mma (auto for the fallback case) and run on fresh
random inputs with the outputs poisoned before the run (tessel-run does that).
"""
import argparse
import json
import pathlib
import sys
import tempfile

here = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(here))
sys.path.insert(0, str(here.parents[0] / "python"))
from attention_case import case_line, run_case, sdpa_tflops  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessel-run", required=True)
    ap.add_argument("--json", required=True)
    opts = ap.parse_args()
    results = {"correctness": [], "interpreter": [], "speed": []}
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        cases = []
        for dtype in ("f16", "bf16"):
            for mask in ("none", "causal", "window"):
                for nq, nk in ((1, 1), (17, 33), (129, 200), (1000, 1000)):
                    cases.append((dtype, mask, 1, 4, 2, nq, nk, 64, 64, 64))
        for dtype in ("f16", "bf16"):
            for mask in ("none", "causal"):
                cases.append((dtype, mask, 2, 4, 1, 300, 257, 128, 128, 64))
                cases.append((dtype, mask, 1, 2, 2, 517, 517, 64, 128, 64))
                cases.append((dtype, mask, 1, 2, 2, 517, 517, 128, 64, 64))
        # Head dim 256 (64x64: 160 KiB of shared memory, one CTA per SM).
        for dtype in ("f16", "bf16"):
            for mask in ("none", "causal"):
                cases.append((dtype, mask, 1, 2, 1, 300, 257, 256, 64, 64))
        # Scales that are not positive and finite (the exact side of the scale branch).
        cases += [("f16", "causal", 1, 2, 1, 129, 200, 64, 64, 64, -0.25),
                  ("bf16", "none", 1, 2, 2, 300, 257, 128, 128, 64, 0.0),
                  ("f16", "none", 1, 2, 2, 517, 517, 128, 128, 64, -0.125)]
        for dtype, mask, B, H, Hkv, nq, nk, D, bm, bn, *scale in cases:
            scale = scale[0] if scale else None
            r = run_case(opts.tessel_run, tmp, dtype, mask, B, H, Hkv, nq, nk, D, bm, bn,
                         scale=scale)
            r.update(dtype=dtype, mask=mask, nq=nq, nk=nk, d=D, bm=bm, bn=bn, scale=scale)
            results["correctness"].append(r)
            failures += not r["ok"]
            print(case_line(r), flush=True)
        # The GPU against the interpreter (the oracle) on the same inputs; f32 goes to the
        # reference lowering under --codegen=auto.
        for dtype, mask, codegen in (("f16", "causal", "mma"), ("bf16", "none", "mma"),
                                     ("f32", "causal", "auto")):
            r = run_case(opts.tessel_run, tmp, dtype, mask, 1, 2, 1, 90, 130, 64, 64, 64,
                         codegen=codegen, device="both")
            r.update(dtype=dtype, mask=mask, codegen=codegen)
            results["interpreter"].append(r)
            failures += not r["ok"]
            print(f"gpu vs interpreter {dtype} {mask} {codegen}: "
                  f"{r.get('compare', r.get('stderr', '')[-300:])}", flush=True)
        # Speed: b·n = 16384 tokens, h·d = 2048 (as bench/anchors.md), fp16.
        # d128: 128x64 (4 warps of 32 rows, FA2's layout) and 64x64 (4 warps of 16 rows, two
        # CTAs per SM); d64: 64x64 and 128x64.
        sdpa_cache = {}
        for D, N, causal, bm, bn in ((128, 4096, False, 128, 64), (128, 4096, False, 64, 64),
                                     (128, 16384, False, 128, 64), (128, 16384, False, 64, 64),
                                     (128, 4096, True, 128, 64), (128, 4096, True, 64, 64),
                                     (128, 16384, True, 128, 64), (128, 16384, True, 64, 64),
                                     (64, 4096, False, 64, 64), (64, 4096, False, 128, 64),
                                     (64, 16384, False, 64, 64), (64, 16384, False, 128, 64),
                                     (64, 16384, True, 64, 64), (64, 16384, True, 128, 64)):
            B, H = 16384 // N, 2048 // D
            flops = 4 * B * H * N * N * D / (2 if causal else 1)
            r = run_case(opts.tessel_run, tmp, "f16", "causal" if causal else "none", B, H, H,
                         N, N, D, bm, bn, repeats=20, reference=False)
            if "median_ms" in r:
                r["tflops"] = flops / (r["median_ms"] * 1e-3) / 1e12
            row = {"b": B, "h": H, "n": N, "d": D, "causal": causal, "bm": bm, "bn": bn,
                   "tessel_mma": r}
            if (D, N, causal) not in sdpa_cache:
                sdpa_cache[(D, N, causal)] = sdpa_tflops(B, H, N, D, causal, flops,
                                                         backends=("flash", "cudnn"), repeats=20)
            row["sdpa"] = sdpa_cache[(D, N, causal)]
            results["speed"].append(row)
            print(f"speed d={D} n={N} causal={causal} {bm}x{bn}: {r.get('tflops', 'FAIL')} "
                  f"{r.get('gpu', r.get('stderr', '')[-300:])}", flush=True)
    pathlib.Path(opts.json).write_text(json.dumps(results, indent=1))
    print("\n| d | n | causal | block | tessel mma | FA2 (SDPA flash) | cuDNN | tessel / FA2 |")
    print("|---|---|---|---|---|---|---|---|")
    for row in results["speed"]:
        cell = lambda x: f"{x['tflops']:.1f}" if "tflops" in x else "—"
        s = row["sdpa"]
        t, f = row["tessel_mma"].get("tflops"), s.get("flash", {}).get("tflops")
        ratio = f"{t / f:.2f}" if t and f else "—"
        print(f"| {row['d']} | {row['n']} | {'yes' if row['causal'] else 'no'} | "
              f"{row['bm']}x{row['bn']} | {cell(row['tessel_mma'])} | "
              f"{cell(s.get('flash', {}))} | {cell(s.get('cudnn', {}))} | {ratio} |")
    n = len(results["correctness"]) + len(results["interpreter"])
    print(f"\n{n - failures} passed, {failures} failed (GPU correctness, mma path)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
