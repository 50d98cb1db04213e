"""Shared by the examples: find tessel, make inputs, report the error.

An installed tessel (`pip install .`) is used as it is; the build tree's package
(build/python, or $TESSEL_BUILD_DIR/python) only when tessel is not installed, or when
TESSEL_BUILD_DIR asks for it explicitly.
"""
import importlib.util
import os
import pathlib
import sys

root = pathlib.Path(__file__).resolve().parents[2]
_build = os.environ.get("TESSEL_BUILD_DIR")
if _build or importlib.util.find_spec("tessel") is None:
    sys.path.insert(0, str(pathlib.Path(_build or root / "build") / "python"))

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
