"""Shared by the examples: find tessel, make inputs, report the error, and the helpers of the
tile programs beyond attention (gemm.py, softmax.py, layer_norm.py, elementwise.py), whose host
functions take numpy arrays (the interpreter) or CUDA torch tensors (the GPU) alike.

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


def placement(cuda):
    """(dev, dev16, host) for the serving examples: numpy arrays to where the example runs —
    as they are for the interpreter, or CUDA torch tensors (dev16: fp16) — and results back
    to numpy float32."""
    if not cuda:
        return (lambda x: x), (lambda x: x), np.asarray
    import torch
    dev = lambda x: torch.from_numpy(np.ascontiguousarray(x)).cuda()       # noqa: E731
    return dev, (lambda x: dev(x).half()), (lambda x: x.float().cpu().numpy())


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


def cdiv(a, b):
    return -(-a // b)


def next_power_of_2(n):
    return 1 << max(0, n - 1).bit_length()


def empty(like, shape, dtype=None):
    """An array of `shape` where `like` is: numpy beside numpy, a CUDA tensor on `like`'s device
    beside a CUDA tensor; of `like`'s dtype by default (a dtype name such as "float32" means
    that dtype of either library)."""
    if isinstance(like, np.ndarray):
        return np.empty(shape, dtype or like.dtype)
    import torch
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    return torch.empty(shape, dtype=dtype or like.dtype, device=like.device)


def zeros(like, shape, dtype=None):
    """empty(like, shape, dtype) filled with zeros."""
    out = empty(like, shape, dtype)
    if isinstance(out, np.ndarray):
        out.fill(0)
    else:
        out.zero_()
    return out


def contiguous(x):
    """x with rows packed (the kernels address rows by their length), copied only if needed."""
    return np.ascontiguousarray(x) if isinstance(x, np.ndarray) else x.contiguous()


def as_float64(x):
    """float64 numpy values of a numpy array (uint16: bf16 bit patterns) or a torch tensor."""
    from tessel import from_bf16
    if isinstance(x, np.ndarray):
        return (from_bf16(x) if x.dtype == np.uint16 else x).astype(np.float64)
    return x.detach().double().cpu().numpy()


def cuda_torch():
    """torch when it is installed and sees a CUDA device, else None (the examples then run on
    the interpreter only)."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None
