"""Running compiled kernels: argument conversion and the dispatch point between backends.

Two backends, chosen by the arguments (`placement`): numpy arrays run on the CPU interpreter
(tessel._tessel.KernelBuilder.run_kernel, `launch` below); CUDA torch tensors and
tessel.DevicePointer run on the GPU (tessel/gpu.py, the C++ Launcher). Scalars go with either.

bf16: numpy has no bfloat16. An array of dtype uint16 is taken as bf16 bit patterns (use
`to_bf16` / `from_bf16`); arrays of ml_dtypes.bfloat16 are accepted too where that package is
installed.
"""
import operator
import os

import numpy as np

from . import _tessel
from . import gpu
from .errors import KernelRuntimeError

# Types whose instances carry a `dtype` the launch key reads (jit.py, the C Dispatcher); torch's
# tensor types join when first seen (add_array_type).
ARRAY_TYPES = set()


def add_array_type(t):
    """Makes the specialisation key of kernel calls read `dtype` from instances of type t."""
    if t not in ARRAY_TYPES:
        ARRAY_TYPES.add(t)
        _tessel._add_array_type(t)


add_array_type(np.ndarray)
add_array_type(gpu.DevicePointer)

# Float scalars are keyed by their range, not only their type (`float_range`): float and its
# subclasses (np.float64) in C, numpy's other floating types registered here.
for _t in (np.float16, np.float32, np.longdouble):
    _tessel._add_float_type(_t)

#: A positive float in [2^-64, 2^64]: a kernel specialised on it may fold the value into
#: products (a softmax scale times log2(e)) with no run-time check that it is positive and
#: finite (docs/dsl-decisions.md, "Float arguments"). The C Dispatcher tests the same range.
MODERATE_MIN, MODERATE_MAX = 2.0 ** -64, 2.0 ** 64


def float_range(value):
    """The specialisation of a float scalar argument: "moderate" (see MODERATE_MIN) or "any"."""
    return "moderate" if MODERATE_MIN <= float(value) <= MODERATE_MAX else "any"


_NUMPY_TO_DTYPE = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16",
                   np.dtype(np.int32): "i32", np.dtype(np.uint16): "bf16",
                   np.dtype(np.uint8): "f8e4m3fn"}


def dtype_of_array(a):
    if a.dtype.name == "bfloat16":
        return "bf16"
    d = _NUMPY_TO_DTYPE.get(a.dtype)
    if d is None:
        raise TypeError(f"arrays of {a.dtype} are not supported: use float32, float16, int32, "
                        "uint16 (bf16 bit patterns) or uint8 (FP8 e4m3fn bit patterns)")
    return d


def is_array(value):
    return isinstance(value, (np.ndarray, gpu.DevicePointer)) or gpu.is_torch_tensor(value)


def where_is(name, value):
    """"host" (numpy), "cuda" (a CUDA tensor, a DevicePointer) or None (a scalar)."""
    if isinstance(value, np.ndarray):
        return "host"
    if isinstance(value, gpu.DevicePointer):
        return "cuda"
    if gpu.is_torch_tensor(value):
        if value.is_cuda:
            return "cuda"
        raise TypeError(f"argument '{name}' is a torch tensor on {value.device}: tessel runs "
                        "CUDA tensors on the GPU and numpy arrays on the CPU interpreter "
                        "(pass tensor.numpy())")
    return None


def placement(params, args):
    """Where a kernel with run-time params [(name, kind, dtype)] runs on `args`: "host",
    "cuda", or None when no argument is an array."""
    places = {where_is(name, value) for (name, _, _), value in zip(params, args)} - {None}
    if len(places) > 1:
        raise TypeError("a kernel's array arguments must all be numpy arrays (interpreter) or "
                        "all device memory (GPU), not a mix")
    return places.pop() if places else None


def device_of_args(args):
    """The CUDA device of the first device argument (0 when there is none)."""
    for value in args:
        if isinstance(value, gpu.DevicePointer) or gpu.is_torch_tensor(value):
            return gpu.device_of(value)
    return 0


def classify(name, value):
    """(kind, dtype) of one run-time kernel argument."""
    if isinstance(value, np.ndarray):
        return "ptr", dtype_of_array(value)
    if isinstance(value, gpu.DevicePointer):
        return "ptr", value.dtype
    if gpu.is_torch_tensor(value):
        where_is(name, value)
        return "ptr", gpu.torch_dtype_name(value)
    if isinstance(value, (bool, np.bool_)):
        return "scalar", "i32"
    if isinstance(value, (int, np.integer)):
        return "scalar", "i32"
    if isinstance(value, (float, np.floating)):
        return "scalar", "f32"
    raise TypeError(f"argument '{name}': cannot pass a {type(value).__name__} to a kernel "
                    "(numpy arrays, CUDA tensors, tessel.DevicePointer, ints and floats only; "
                    "mark compile-time values tl.constexpr)")


def to_bf16(x):
    """Rounds floats to bfloat16 (to nearest even), as numpy carries bf16: uint16 bit patterns.

    Args:
        x: an array-like of floats.

    Returns:
        numpy.ndarray: uint16 bit patterns of x's shape; NaN stays NaN.
    """
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    out = ((bits + rounding) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    out[nan] = 0x7FC0
    return out


def from_bf16(x):
    """The float32 values of bfloat16 bit patterns (the inverse of :func:`to_bf16`).

    Args:
        x: an array-like of uint16 bit patterns.

    Returns:
        numpy.ndarray: float32, of x's shape.
    """
    return (np.asarray(x, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _e4m3_values():
    """The float64 value of each positive e4m3fn bit pattern 0x00..0x7E (0x7F is NaN)."""
    bits = np.arange(0x7F)
    exponent, fraction = bits >> 3, bits & 7
    normal = np.ldexp(1.0 + fraction / 8.0, exponent - 7)
    return np.where(exponent == 0, np.ldexp(fraction.astype(np.float64), -9), normal)


_E4M3 = _e4m3_values()


def to_fp8(x):
    """Rounds floats to FP8 e4m3fn (to nearest even, saturating at ±448 as the GPU's
    cvt.rn.satfinite does), as numpy carries it: uint8 bit patterns.

    Args:
        x: an array-like of floats.

    Returns:
        numpy.ndarray: uint8 bit patterns of x's shape; NaN becomes 0x7F (with its sign).
    """
    v = np.asarray(x, dtype=np.float64)
    a = np.minimum(np.abs(np.nan_to_num(v, nan=0.0, posinf=448.0, neginf=-448.0)), 448.0)
    with np.errstate(divide="ignore"):
        exponent = np.maximum(np.floor(np.log2(np.where(a > 0, a, 1.0))), -6.0)
    quantum = np.ldexp(1.0, (exponent - 3).astype(np.int64))
    rounded = np.minimum(np.round(a / quantum) * quantum, 448.0)   # np.round: ties to even
    out = np.searchsorted(_E4M3, rounded).astype(np.uint8)
    out |= np.where(np.signbit(v), 0x80, 0).astype(np.uint8)
    out[np.isnan(v)] |= 0x7F
    return out


def from_fp8(x):
    """The float32 values of FP8 e4m3fn bit patterns (the inverse of :func:`to_fp8`).

    Args:
        x: an array-like of uint8 bit patterns.

    Returns:
        numpy.ndarray: float32, of x's shape.
    """
    bits = np.asarray(x, dtype=np.uint8)
    magnitude = bits & 0x7F
    value = np.where(magnitude == 0x7F, np.nan, _E4M3[np.minimum(magnitude, 0x7E)])
    return np.where(bits & 0x80, -value, value).astype(np.float32)


def _grid3(grid):
    """The three sizes of a grid, checked as the CUDA launcher checks them (Launcher.h
    parseGrid): ints (operator.index: a float is refused, not truncated), 1 to 3 of them,
    each from 0 to 2^31 - 1."""
    g = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
    if not 1 <= len(g) <= 3:
        raise ValueError(f"a grid has 1 to 3 sizes, got {grid!r}")
    try:
        sizes = [operator.index(x) for x in g]
    except TypeError:
        raise TypeError(f"a grid is an int or a tuple of 1 to 3 ints, got {grid!r}") from None
    if any(not 0 <= x <= 2**31 - 1 for x in sizes):
        raise ValueError(f"a grid size must be between 0 and 2^31-1, got {grid!r}")
    return sizes + [1] * (3 - len(g))


def _max_steps():
    """([budget]) from TESSEL_MAX_STEPS (0 = no limit), or () for the interpreter's default."""
    text = os.environ.get("TESSEL_MAX_STEPS", "").strip()
    if not text:
        return ()
    try:
        steps = int(text, 0)
    except ValueError:
        steps = -1
    if steps < 0:
        raise ValueError(f"TESSEL_MAX_STEPS must be a non-negative integer, got {text!r}")
    return (steps,)


def launch(kernel, grid, args, backend=None):
    """Runs `kernel` over `grid`. The dispatch point: numpy arrays go to the interpreter."""
    from . import _tessel
    if not _tessel.has_interpreter:
        raise RuntimeError("this build of tessel has no interpreter")
    if len(args) != len(kernel.params):
        raise TypeError(f"{kernel.name} takes {len(kernel.params)} run-time arguments, "
                        f"got {len(args)}")
    call_args, copies = [], []
    for (name, kind, dtype), value in zip(kernel.params, args):
        if kind == "ptr":
            if dtype_of_array(value) != dtype:
                raise TypeError(f"argument '{name}' is {value.dtype}, the kernel was "
                                f"specialised for {dtype}")
            arr = value.view(np.uint16) if value.dtype.name == "bfloat16" else value
            if not arr.flags.c_contiguous or not arr.flags.writeable:
                tmp = np.ascontiguousarray(arr).copy()
                copies.append((name, value, tmp))
                arr = tmp
            call_args.append(arr)
        else:
            call_args.append(float(value) if dtype == "f32" else int(value))
    grid = _grid3(grid)
    if 0 in grid:        # as on the GPU (and in Triton): an empty grid launches nothing
        return
    diags = kernel._builder.run_kernel(kernel.name, grid, call_args, *_max_steps())
    errors = [d for d in diags if d[0] == "error"]
    if errors:
        _, message, filename, line, col = errors[0]
        where = f"{filename}:{line}:{col}: " if filename else ""
        raise KernelRuntimeError(f"{where}{message}")
    for name, original, tmp in copies:
        result = tmp.view(original.dtype) if original.dtype != tmp.dtype else tmp
        if original.flags.writeable:
            original[...] = result
        elif not np.array_equal(np.ascontiguousarray(original).view(np.uint8).ravel(),
                                np.ascontiguousarray(result).view(np.uint8).ravel()):
            # A read-only input the kernel only reads is fine; one it wrote would silently lose
            # the results.
            raise ValueError(f"argument '{name}' of {kernel.name} is a read-only array, and the "
                             "kernel writes to it: pass a writable array")
