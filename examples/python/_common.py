"""Shared by the examples: find the built package, make inputs, report the error."""
import os
import pathlib
import sys

root = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(pathlib.Path(os.environ.get("TESSEL_BUILD_DIR", root / "build")) / "python"))

import numpy as np  # noqa: E402

from tessel.reference import max_rel_error, reference_attention  # noqa: E402


def inputs(B=1, H=2, N=100, D=32, Hkv=None, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((B, H, N, D)).astype(np.float32)
    k = rng.standard_normal((B, Hkv or H, N, D)).astype(np.float32)
    v = rng.standard_normal((B, Hkv or H, N, D)).astype(np.float32)
    return q, k, v


def report(name, out, ref):
    err = max_rel_error(out, ref)
    print(f"{name}: max error vs float64 numpy = {err:.2e}")
    return err
