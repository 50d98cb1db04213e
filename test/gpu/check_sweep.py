"""Issue 5's standard sweep on the GPU: attention through tessel's default code generation
(--codegen=auto: wgmma on sm_90a, mma.sync on sm_80, where the kernel fits; the blocks
tessel.attention picks) against a float32 torch reference
on fresh random inputs, for b·n = 16k tokens, h·d = 2048, n from 512 to 16k, d 64 and 128, causal
and not, plus n = 1000 and 4097 and grouped-query 4:1; then tessel vs SDPA's math path at n = 4k.

    python3 test/gpu/check_sweep.py --tessel-run PATH --json OUT.json
"""
import argparse
import json
import math
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
from attention_kernels import naive_attention_kernel  # noqa: E402
from tessel.attention import gpu_blocks  # noqa: E402

CHIP = "sm_90a" if torch.cuda.get_device_capability(0)[0] >= 9 else "sm_80"

TOL = {"f16": 5e-3, "bf16": 2e-2}
TORCH = {"f16": torch.float16, "bf16": torch.bfloat16}


def reference(q, k, v, causal, scale):
    """float32 attention, one (batch, head) at a time so n = 16k fits; SDPA semantics."""
    B, H, N, D = q.shape
    group = H // k.shape[1]
    o = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    for b in range(B):
        for h in range(H):
            s = (q[b, h].float() @ k[b, h // group].float().T) * scale
            if causal:
                s.masked_fill_(torch.ones_like(s, dtype=torch.bool).triu(1), float("-inf"))
            o[b, h] = torch.softmax(s, dim=-1) @ v[b, h // group].float()
    return o


def run_tessel(tessel_run, tmp, dtype, causal, q, k, v, block, repeats=0, block_n=64):
    B, H, N, D = q.shape
    Hkv = k.shape[1]
    kernel = tmp / "attention.mlir"
    kernel.write_text(naive_attention_kernel(dtype, "causal" if causal else "none", block, block_n, D))
    args = []
    for name, x in (("q", q), ("k", k), ("v", v)):
        host = x.cpu().contiguous().view(torch.int16).numpy().view(
            np.float16 if dtype == "f16" else np.uint16)
        np.save(tmp / f"{name}.npy", host.ravel())
        args.append(f"--arg={tmp / f'{name}.npy'}")
    scale = 1.0 / math.sqrt(D)
    args += [f"--arg=zeros:{q.numel()}", f"--arg=zeros:{B * H * N}", f"--arg={N}", f"--arg={N}",
             f"--arg={H}", f"--arg={Hkv}", f"--arg={scale!r}", "--arg=0"]
    cmd = [tessel_run, str(kernel), "--kernel=attention", f"--grid={-(-N // block)},{B * H}",
           "--pipeline=builtin.module(tile-optimize)", "--device=gpu", "--codegen=auto", *args,
           f"--out=3:{tmp / 'o.npy'}"]
    if repeats:
        cmd.append(f"--repeats={repeats}")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return None, {"error": (r.stderr or r.stdout)[-1000:]}
    info = {"log": r.stdout.strip()}
    for line in r.stdout.splitlines():
        if " median " in line:
            info["median_ms"] = float(line.split(" median ")[1].split()[0])
    o = np.load(tmp / "o.npy")
    o = torch.from_numpy(o.view(np.int16)).view(TORCH[dtype]).reshape(q.shape)
    return o.to(q.device).float(), info


def math_ms(q, k, v, causal):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(SDPBackend.MATH):
        f = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        f()
        times = []
        for _ in range(5):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); f(); e.record(); torch.cuda.synchronize()
            times.append(s.elapsed_time(e))
    return sorted(times)[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessel-run", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--speed-only", action="store_true", help="only tessel vs SDPA math at n = 4k")
    opts = ap.parse_args()
    torch.manual_seed(0)
    cases = [("f16", N, D, causal, 2048 // D)
             for D in (64, 128) for N in (512, 1024, 2048, 4096, 8192, 16384)
             for causal in (False, True)]
    cases += [("f16", 1000, 128, True, 16), ("f16", 4097, 128, False, 16),
              ("bf16", 4096, 128, True, 16), ("bf16", 1000, 64, False, 32)]
    if opts.speed_only:
        cases = []
    results, failures = [], 0
    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        for dtype, N, D, causal, H in cases + ([] if opts.speed_only else [("f16", 4096, 128, True, "gqa")]):
            gqa = H == "gqa"
            H = 16 if gqa else H
            Hkv = 4 if gqa else H
            B = max(1, 16384 // N)
            q = torch.randn(B, H, N, D, device="cuda", dtype=TORCH[dtype])
            k = torch.randn(B, Hkv, N, D, device="cuda", dtype=TORCH[dtype])
            v = torch.randn(B, Hkv, N, D, device="cuda", dtype=TORCH[dtype])
            # The blocks tessel.attention picks on this GPU's chip.
            bm, bn = gpu_blocks(D, dtype, N, N, CHIP, unmasked=not causal)
            o, info = run_tessel(opts.tessel_run, tmp, dtype, causal, q, k, v, bm, block_n=bn)
            row = {"dtype": dtype, "b": B, "h": H, "hkv": Hkv, "n": N, "d": D, "causal": causal, **info}
            if o is not None:
                ref = reference(q, k, v, causal, 1.0 / math.sqrt(D))
                row["rel_err"] = float((o - ref).abs().max() / ref.abs().max())
                row["nan"] = bool(torch.isnan(o).any())
                row["ok"] = row["rel_err"] < TOL[dtype] and not row["nan"]
            else:
                row["ok"] = False
            failures += not row["ok"]
            results.append(row)
            print(f"{dtype} b={B:2} h={H:2}/{Hkv:2} n={N:5} d={D:3} causal={causal!s:5}: "
                  + ("ok" if row["ok"] else "FAIL") + f"  rel {row.get('rel_err', float('nan')):.2e}"
                  + ("" if row["ok"] else f" {row.get('error', '')}"), flush=True)
            del q, k, v
            torch.cuda.empty_cache()
        speed = []
        for D in (64, 128):
            N, H, B = 4096, 2048 // D, 4
            q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
            flops = 4 * B * H * N * N * D
            bm, bn = gpu_blocks(D, "f16", N, N, CHIP, unmasked=True)
            _, info = run_tessel(opts.tessel_run, tmp, "f16", False, q, k, v, bm, repeats=10,
                                 block_n=bn)
            m = math_ms(q, k, v, False)
            row = {"d": D, "n": N, "tessel_ms": info.get("median_ms"), "math_ms": m}
            if info.get("median_ms"):
                row["tessel_tflops"] = flops / (info["median_ms"] * 1e-3) / 1e12
                row["math_tflops"] = flops / (m * 1e-3) / 1e12
                row["speedup_vs_math"] = m / info["median_ms"]
            speed.append(row)
            print(f"n=4096 d={D}: tessel {row.get('tessel_tflops', 0):.1f} TFLOP/s, SDPA math "
                  f"{row.get('math_tflops', 0):.1f} → {row.get('speedup_vs_math', 0):.1f}x", flush=True)
    pathlib.Path(opts.json).write_text(json.dumps({"sweep": results, "vs_math": speed}, indent=1))
    print(f"\n{len(results) - failures} passed, {failures} failed (standard sweep vs float32)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
