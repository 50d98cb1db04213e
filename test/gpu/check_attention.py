"""Attention on the GPU through the reference lowering (--codegen=reference) against float64 references and the interpreter,
then timed side by side with PyTorch SDPA. Run by scripts/gpu-check.sh on the GPU machine.

Every case: the naive kernel of test/python/attention_kernels.py, made streamed by tile-optimize
inside tessel-run, compiled for the device and run through the CUDA driver on fresh random inputs
with the outputs poisoned (0xFF bytes) before the run.
"""
import argparse
import json
import math
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
from attention_kernels import (from_bf16_bits, naive_attention_kernel, reference_attention,
                               to_bf16_bits)  # noqa: E402

TOL = {"f16": 5e-3, "bf16": 2e-2, "f32": 1e-4}




def encode(x, dtype):
    if dtype == "bf16":
        return to_bf16_bits(x)
    return x.astype(np.float16 if dtype == "f16" else np.float32)


def decode(x, dtype):
    return from_bf16_bits(x) if dtype == "bf16" else x.astype(np.float32)


def run_case(tessel_run, tmp, dtype, mask, B, H, Hkv, Nq, Nk, D, block, window=64, device="gpu",
             repeats=0, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((B, H, Nq, D)).astype(np.float32)
    k = rng.standard_normal((B, Hkv, Nk, D)).astype(np.float32)
    v = rng.standard_normal((B, Hkv, Nk, D)).astype(np.float32)
    q, k, v = (decode(encode(x, dtype), dtype) for x in (q, k, v))  # what the kernel sees
    kernel = tmp / "attention.mlir"
    kernel.write_text(naive_attention_kernel(dtype, mask, block, block, D))
    args = []
    for name, x in (("q", q), ("k", k), ("v", v)):
        np.save(tmp / f"{name}.npy", encode(x, dtype).ravel())
        args.append(f"--arg={tmp / f'{name}.npy'}")
    scale = 1.0 / math.sqrt(D)
    args += [f"--arg=zeros:{q.size}", f"--arg=zeros:{B * H * Nq}", f"--arg={Nq}", f"--arg={Nk}",
             f"--arg={H}", f"--arg={Hkv}", f"--arg={scale!r}", f"--arg={window}"]
    cmd = [tessel_run, str(kernel), "--kernel=attention", f"--grid={-(-Nq // block)},{B * H}",
           "--pipeline=builtin.module(tile-optimize)", f"--device={device}",
           "--codegen=reference", *args,
           f"--out=3:{tmp / 'o.npy'}", f"--out=4:{tmp / 'lse.npy'}"]
    if repeats:
        cmd.append(f"--repeats={repeats}")
    if device == "both":  # outputs are rounded to the input type: allow an ulp or two of it
        cmd += [f"--rtol={TOL[dtype] / 2}", f"--atol={TOL[dtype] / 5}"]
    start = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    wall = time.time() - start
    if r.returncode != 0:
        return {"ok": False, "error": (r.stderr or r.stdout)[-2000:]}
    result = {"ok": True, "wall_s": round(wall, 2), "log": r.stdout.strip().splitlines()}
    for line in r.stdout.splitlines():
        if " median " in line:
            result["median_ms"] = float(line.split(" median ")[1].split()[0])
        if line.startswith("compare cpu/gpu"):
            result["compare"] = line
            result["ok"] = line.endswith("OK")
    o = decode(np.load(tmp / "o.npy"), dtype).reshape(q.shape).astype(np.float64)
    lse = np.load(tmp / "lse.npy").reshape(B, H, Nq)
    if Nq * Nk * B * H <= 4_000_000:
        ref_o, ref_lse = reference_attention(q, k, v, scale, mask, window)
        rel = float(np.abs(o - ref_o).max() / max(np.abs(ref_o).max(), 1e-30))
        masked = np.isneginf(ref_lse)
        nan_free = not (np.isnan(o).any() or np.isnan(lse).any())
        masked_ok = bool((o[masked] == 0).all() and np.isneginf(lse[masked]).all())
        lse_err = float(np.abs(lse[~masked] - ref_lse[~masked]).max()) if (~masked).any() else 0.0
        result.update(rel_err=rel, lse_abs_err=lse_err, nan_free=nan_free, masked_ok=masked_ok)
        result["ok"] = result["ok"] and nan_free and masked_ok and rel < TOL[dtype] and lse_err < 1e-2
    return result


def sdpa_tflops(B, H, N, D, causal, flops, backends=("flash", "cudnn", "math"), repeats=10):
    """PyTorch SDPA under each of `backends` on the same shape, fp16, median of `repeats`
    CUDA-event timings after 3 warm-up calls. Shared by the GPU check scripts."""
    try:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except Exception as e:  # noqa: BLE001
        return {"error": f"no torch: {e}"}
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    out = {}
    known = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
             "math": SDPBackend.MATH}
    for name in backends:
        backend = known[name]
        try:
            with sdpa_kernel(backend):
                f = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
                for _ in range(3):
                    f()
                times = []
                for _ in range(repeats):
                    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    s.record(); f(); e.record(); torch.cuda.synchronize()
                    times.append(s.elapsed_time(e))
            ms = sorted(times)[len(times) // 2]
            out[name] = {"ms": ms, "tflops": flops / (ms * 1e-3) / 1e12}
        except Exception as e:  # noqa: BLE001
            out[name] = {"error": str(e)[:200]}
    return out


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
                    r = run_case(opts.tessel_run, tmp, dtype, mask, 1, 4, 2, nq, nk, 64, 16)
                    r.update(dtype=dtype, mask=mask, nq=nq, nk=nk, d=64, gqa="4:2")
                    results["correctness"].append(r)
                    failures += not r["ok"]
                    print(f"{dtype:5} {mask:7} nq={nq:5} nk={nk:5} d=64: "
                          + ("ok" if r["ok"] else "FAIL") + f"  rel {r.get('rel_err', float('nan')):.2e}"
                          + ("" if r["ok"] else f"  {r.get('error', '')[:300]}"))
        for dtype, mask, block, D in (("f16", "causal", 32, 128), ("bf16", "none", 64, 64),
                                      ("f16", "window", 16, 128)):
            r = run_case(opts.tessel_run, tmp, dtype, mask, 2, 4, 1, 300, 257, D, block)
            r.update(dtype=dtype, mask=mask, nq=300, nk=257, d=D, block=block, gqa="4:1")
            results["correctness"].append(r)
            failures += not r["ok"]
            print(f"{dtype:5} {mask:7} nq=300 nk=257 d={D} block={block} gqa 4:1: "
                  + ("ok" if r["ok"] else "FAIL") + f"  rel {r.get('rel_err', float('nan')):.2e}")
        # The GPU against the interpreter, the oracle, on the same inputs.
        for dtype, mask in (("f16", "causal"), ("f32", "window")):
            r = run_case(opts.tessel_run, tmp, dtype, mask, 1, 2, 1, 40, 70, 64, 16, device="both")
            r.update(dtype=dtype, mask=mask)
            results["interpreter"].append(r)
            failures += not r["ok"]
            print(f"gpu vs interpreter {dtype} {mask}: {r.get('compare', r.get('error', ''))}")
        # Speed of the reference lowering, with SDPA on the same shape in the same run.
        for N, causal in ((1024, False), (4096, False), (4096, True)):
            B, H, D = 16384 // N, 16, 64
            flops = 4 * B * H * N * N * D / (2 if causal else 1)
            r = run_case(opts.tessel_run, tmp, "f16", "causal" if causal else "none", B, H, H, N, N,
                         D, 32, repeats=5)
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
