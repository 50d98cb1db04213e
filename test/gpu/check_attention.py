"""Attention on the GPU through the reference lowering (--codegen=reference) against float64 references and the interpreter,
then timed side by side with PyTorch SDPA. Run by scripts/gpu-check.sh on the GPU machine.

Every case: the naive kernel of test/python/attention_kernels.py, made streamed by tile-optimize
inside tessel-run, compiled for the device and run through the CUDA driver on fresh random inputs
with the outputs poisoned (0xFF bytes) before the run.
"""
import argparse
import json
import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from attention_case import run_case, sdpa_tflops  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessel-run", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--quick", action="store_true")
    opts = ap.parse_args()
    results = {"correctness": [], "interpreter": [], "speed": []}
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        shapes = [(1, 1), (17, 17), (129, 200), (1000, 1000)]
        if opts.quick:
            shapes = shapes[:2]
        for dtype in ("f16", "bf16", "f32"):
            for mask in ("none", "causal", "window"):
                for nq, nk in shapes:
                    r = run_case(opts.tessel_run, tmp, dtype, mask, 1, 4, 2, nq, nk, 64, 16, 16,
                                 codegen="reference")
                    r.update(dtype=dtype, mask=mask, nq=nq, nk=nk, d=64, gqa="4:2")
                    results["correctness"].append(r)
                    failures += not r["ok"]
                    print(f"{dtype:5} {mask:7} nq={nq:5} nk={nk:5} d=64: "
                          + ("ok" if r["ok"] else "FAIL") + f"  rel {r.get('rel_err', float('nan')):.2e}"
                          + ("" if r["ok"] else f"  {r.get('stderr', '')[-300:]}"))
        for dtype, mask, block, D in (("f16", "causal", 32, 128), ("bf16", "none", 64, 64),
                                      ("f16", "window", 16, 128)):
            r = run_case(opts.tessel_run, tmp, dtype, mask, 2, 4, 1, 300, 257, D, block, block,
                         codegen="reference")
            r.update(dtype=dtype, mask=mask, nq=300, nk=257, d=D, block=block, gqa="4:1")
            results["correctness"].append(r)
            failures += not r["ok"]
            print(f"{dtype:5} {mask:7} nq=300 nk=257 d={D} block={block} gqa 4:1: "
                  + ("ok" if r["ok"] else "FAIL") + f"  rel {r.get('rel_err', float('nan')):.2e}")
        # The GPU against the interpreter, the oracle, on the same inputs.
        for dtype, mask in (("f16", "causal"), ("f32", "window")):
            r = run_case(opts.tessel_run, tmp, dtype, mask, 1, 2, 1, 40, 70, 64, 16, 16,
                         codegen="reference", device="both")
            r.update(dtype=dtype, mask=mask)
            results["interpreter"].append(r)
            failures += not r["ok"]
            print(f"gpu vs interpreter {dtype} {mask}: {r.get('compare', r.get('stderr', ''))}")
        # Speed of the reference lowering, with SDPA on the same shape in the same run.
        for N, causal in ((1024, False), (4096, False), (4096, True)):
            B, H, D = 16384 // N, 16, 64
            flops = 4 * B * H * N * N * D / (2 if causal else 1)
            r = run_case(opts.tessel_run, tmp, "f16", "causal" if causal else "none", B, H, H, N, N,
                         D, 32, 32, codegen="reference", repeats=5, reference=False)
            row = {"b": B, "h": H, "n": N, "d": D, "causal": causal, "tessel_reference": r,
                   "sdpa": sdpa_tflops(B, H, N, D, causal, flops)}
            if "median_ms" in r:
                r["tflops"] = flops / (r["median_ms"] * 1e-3) / 1e12
            results["speed"].append(row)
    pathlib.Path(opts.json).write_text(json.dumps(results, indent=1))
    print("\n| d | n | causal | tessel (reference lowering) | FA2 (SDPA flash) | cuDNN | math |")
    print("|---|---|---|---|---|---|---|")
    for row in results["speed"]:
        cell = lambda x: f"{x['tflops']:.1f}" if "tflops" in x else "—"
        s = row["sdpa"]
        print(f"| {row['d']} | {row['n']} | {'yes' if row['causal'] else 'no'} | "
              f"{cell(row['tessel_reference'])} | {cell(s.get('flash', {}))} | "
              f"{cell(s.get('cudnn', {}))} | {cell(s.get('math', {}))} |")
    n = len(results["correctness"]) + len(results["interpreter"])
    print(f"\n{n - failures} passed, {failures} failed (GPU correctness); TFLOP/s = 4·b·h·n²·d / time"
          " (half for causal), fp16")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
