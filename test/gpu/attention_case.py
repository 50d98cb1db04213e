"""One attention case on the GPU through tessel-run, shared by the GPU check scripts
(check_attention.py: the reference lowering, check_attention_mma.py, check_attention_wgmma.py),
and SDPA's timing on the same shape.

A case: the naive kernel of test/python/attention_kernels.py, made streamed by tile-optimize
inside tessel-run, compiled with --codegen=CODEGEN for the device and run on fresh random inputs
with the outputs poisoned before the run; then compared with a float64 reference (and, with
device="both", with the interpreter on the same inputs). device="cpu" runs the interpreter only:
test/python/test_gpu_check_cases.py checks this plumbing in CI that way.
"""
import math
import pathlib
import subprocess
import sys
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


def run_case(tessel_run, tmp, dtype, mask, B, H, Hkv, Nq, Nk, D, bm, bn, codegen="mma",
             window=64, device="gpu", repeats=0, seed=0, reference=True, scale=None,
             extra=()):
    """Runs one case; returns a dict with ok, wall_s, stderr, the last lines of the log, the
    median time with `repeats`, the comparison line with device="both", and with `reference`
    the errors against float64 (rel_err Frobenius, rel_max max-norm, lse_abs_err, nan_free,
    masked_ok: fully masked rows 0 with lse -inf). `ok` needs rel_max < TOL and lse within 1e-2.
    `extra`: more tessel-run options (e.g. --wgmma-overlap)."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((B, H, Nq, D), dtype=np.float32)
    k = rng.standard_normal((B, Hkv, Nk, D), dtype=np.float32)
    v = rng.standard_normal((B, Hkv, Nk, D), dtype=np.float32)
    q, k, v = (decode(encode(x, dtype), dtype) for x in (q, k, v))
    kernel = tmp / "attention.mlir"
    kernel.write_text(naive_attention_kernel(dtype, mask, bm, bn, D))
    args = []
    for name, x in (("q", q), ("k", k), ("v", v)):
        np.save(tmp / f"{name}.npy", encode(x, dtype).ravel())
        args.append(f"--arg={tmp / f'{name}.npy'}")
    # The softmax scale: 1/sqrt(D) unless given (0 and negative scales take the exact side of the
    # lowering's scale branch, docs/dev/codegen-mma.md).
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    args += [f"--arg=zeros:{q.size}", f"--arg=zeros:{B * H * Nq}", f"--arg={Nq}", f"--arg={Nk}",
             f"--arg={H}", f"--arg={Hkv}", f"--arg={scale!r}", f"--arg={window}"]
    cmd = [tessel_run, str(kernel), "--kernel=attention", f"--grid={-(-Nq // bm)},{B * H}",
           "--pipeline=builtin.module(tile-optimize)", f"--device={device}",
           f"--codegen={codegen}", *extra, *args, f"--out=3:{tmp / 'o.npy'}",
           f"--out=4:{tmp / 'lse.npy'}"]
    if repeats:
        cmd.append(f"--repeats={repeats}")
    if device == "both":
        cmd += [f"--rtol={TOL[dtype] / 2}", f"--atol={TOL[dtype] / 5}"]
    start = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    result = {"ok": r.returncode == 0, "wall_s": round(time.time() - start, 2),
              "stderr": r.stderr[-1500:], "log": r.stdout.strip().splitlines()[-3:]}
    if r.returncode != 0:
        return result
    for line in r.stdout.splitlines():
        if " median " in line:
            result["median_ms"] = float(line.split(" median ")[1].split()[0])
        if line.startswith("gpu: "):
            result["gpu"] = line
        if line.startswith("compare cpu/gpu"):
            result["compare"] = line
            result["ok"] = line.endswith("OK")
    if reference:
        o = decode(np.load(tmp / "o.npy"), dtype).reshape(q.shape).astype(np.float64)
        lse = np.load(tmp / "lse.npy").reshape(B, H, Nq)
        ref_o, ref_lse = reference_attention(q, k, v, scale, mask, window)
        rel = float(np.linalg.norm(o - ref_o) / max(np.linalg.norm(ref_o), 1e-30))
        rel_max = float(np.abs(o - ref_o).max() / max(np.abs(ref_o).max(), 1e-30))
        masked = np.isneginf(ref_lse)
        nan_free = not (np.isnan(o).any() or np.isnan(lse).any())
        masked_ok = bool((o[masked] == 0).all() and np.isneginf(lse[masked]).all())
        lse_err = float(np.abs(lse[~masked] - ref_lse[~masked]).max()) if (~masked).any() else 0.0
        result.update(rel_err=rel, rel_max=rel_max, lse_abs_err=lse_err, nan_free=nan_free,
                      masked_ok=masked_ok)
        result["ok"] = (result["ok"] and nan_free and masked_ok and rel_max < TOL[dtype]
                        and lse_err < 1e-2)
    return result


def case_line(r, wall=False):
    """One printed line for a correctness case: its shape (the fields the caller put in `r`),
    ok/FAIL, the errors against float64, the wall time with `wall`, the tail of stderr on a
    failure."""
    scale = r.get("scale")
    return (f"{r['dtype']:5} {r['mask']:7} nq={r['nq']:5} nk={r['nk']:5} d={r['d']:3} "
            f"{r['bm']}x{r['bn']}" + (f" scale={scale}" if scale is not None else "") + ": "
            + ("ok" if r["ok"] else "FAIL")
            + f"  rel {r.get('rel_err', float('nan')):.2e} max {r.get('rel_max', float('nan')):.2e}"
            f" lse {r.get('lse_abs_err', float('nan')):.1e}"
            + (f" ({r['wall_s']} s)" if wall else "")
            + ("" if r["ok"] else f"  {r.get('stderr', '')[-400:]}"))


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
