"""The run half of the main job: examples/attention_naive.mlir (f16, causal, grouped-query) on
the GPU when there is one, else on the CPU interpreter, against a float64 numpy reference."""
import argparse
import ctypes
import math
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test" / "python"))
from attention_kernels import reference_attention  # noqa: E402


def has_gpu():
    try:
        ctypes.CDLL("libcuda.so.1")
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0
    except OSError:
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessel-run", default=str(ROOT / "build" / "bin" / "tessel-run"))
    ap.add_argument("--device", choices=["auto", "cpu", "gpu"], default="auto")
    opts = ap.parse_args()
    device = ("gpu" if has_gpu() else "cpu") if opts.device == "auto" else opts.device

    B, H, HKV, N, D = 1, 4, 2, 300, 64  # N is not a multiple of the 64-row blocks
    rng = np.random.default_rng(0)
    q = rng.standard_normal((B, H, N, D)).astype(np.float16)
    k = rng.standard_normal((B, HKV, N, D)).astype(np.float16)
    v = rng.standard_normal((B, HKV, N, D)).astype(np.float16)
    scale = 1.0 / math.sqrt(D)
    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        for name, x in (("q", q), ("k", k), ("v", v)):
            np.save(tmp / f"{name}.npy", x.ravel())
        cmd = [opts.tessel_run, str(ROOT / "examples" / "attention_naive.mlir"), "--kernel=attention",
               f"--grid={-(-N // 64)},{B * H}", "--pipeline=builtin.module(tile-optimize)",
               f"--device={device}", f"--arg={tmp / 'q.npy'}", f"--arg={tmp / 'k.npy'}",
               f"--arg={tmp / 'v.npy'}", f"--arg=zeros:{q.size}", f"--arg=zeros:{B * H * N}",
               f"--arg={N}", f"--arg={N}", f"--arg={H}", f"--arg={HKV}", f"--arg={scale!r}",
               f"--out=3:{tmp / 'o.npy'}", f"--out=4:{tmp / 'lse.npy'}"]
        start = time.time()
        r = subprocess.run(cmd, capture_output=True, text=True)
        elapsed = time.time() - start
        if r.returncode != 0:
            sys.exit(f"tessel-run failed:\n{r.stderr}")
        o = np.load(tmp / "o.npy").reshape(q.shape).astype(np.float64)
        lse = np.load(tmp / "lse.npy").reshape(B, H, N)
    ref_o, ref_lse = reference_attention(q, k, v, scale, "causal")
    rel = np.abs(o - ref_o).max() / np.abs(ref_o).max()
    lse_err = np.abs(lse - ref_lse).max()
    where = "GPU" if device == "gpu" else "CPU interpreter"
    print(f"attention f16 causal, B={B} H={H} Hkv={HKV} N={N} D={D} on the {where} "
          f"({elapsed:.2f} s with compilation): {r.stdout.strip()}")
    print(f"  vs float64 numpy: max rel. error of O {rel:.2e}, max abs. error of lse {lse_err:.2e}")
    ok = rel < 5e-3 and lse_err < 1e-2 and not np.isnan(o).any()
    print("  OK" if ok else "  FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
