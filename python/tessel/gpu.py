"""The GPU backend: device arguments, devices and launchers.

A kernel runs on the GPU when its pointer arguments are device memory:

- torch tensors on a CUDA device (``tensor.data_ptr()``; the element type from ``tensor.dtype``);
- ``tessel.DevicePointer(address, dtype, device=0)``: a raw device address (from cupy, numba, a
  C library, ``torch.cuda.caching_allocator_alloc`` ...) with the element type the kernel sees.

numpy arrays run on the CPU interpreter, as before; mixing host and device arguments is an error.

On a call with new argument types or constexprs the kernel is traced and its binary fetched
through the kernel cache (``CompiledKernel.binary``: memory, disk, compile) for the chip of the
device the arguments are on (sm_90a from compute capability 9.0, sm_80 from 8.0), with
``codegen="auto"`` (the mma.sync fast path where the kernel fits it). The binary becomes a
``tessel._tessel.Launcher`` (C++: the cubin loaded once per device, block size, dynamic shared
memory, the argument packing plan), kept for the process. Launches go on torch's current stream
of that device (the legacy default stream 0 when torch is not imported).
"""
import sys
import threading

from . import language as tl

_TORCH_DTYPES = None   # {torch.dtype: tessel dtype name}, built when torch is first seen


class DevicePointer:
    """A device address with the element type a kernel sees it as.

    For memory from cupy, numba, a C library or ``torch.cuda.caching_allocator_alloc``: pass it
    where a kernel takes an array, and the kernel runs on the GPU.

    Args:
        ptr: the device address (an int).
        dtype: ``"f16"``, ``"bf16"``, ``"f32"``, ``"i32"``, a ``tl`` dtype, a numpy dtype or
            name, or a torch dtype.
        device: the CUDA device the memory is on (the launcher checks it with the driver).

    Raises:
        ValueError: a negative address.
        TypeError: a dtype tessel has no element type for.
    """

    __slots__ = ("ptr", "dtype", "device")

    def __init__(self, ptr, dtype, device=0):
        self.ptr = int(ptr)
        if self.ptr < 0:
            raise ValueError("a device address is not negative")
        self.dtype = dtype_name(dtype)
        self.device = int(device)

    def data_ptr(self):
        return self.ptr

    def get_device(self):
        return self.device

    def __repr__(self):
        return f"DevicePointer(0x{self.ptr:x}, {self.dtype!r}, device={self.device})"


_NAMES = {"f8e4m3fn": "f8e4m3fn", "float8_e4m3fn": "f8e4m3fn",
          "f16": "f16", "float16": "f16", "half": "f16", "bf16": "bf16", "bfloat16": "bf16",
          "f32": "f32", "float32": "f32", "float": "f32", "i32": "i32", "int32": "i32"}


def dtype_name(dtype):
    """The tessel element type name ("f16", "bf16", "f32", "i32") of a dtype-like value."""
    if isinstance(dtype, tl.dtype):
        name = dtype.name
    elif isinstance(dtype, type) or type(dtype).__module__.startswith("numpy"):
        import numpy as np
        name = _NAMES.get(np.dtype(dtype).name)
    else:
        text = str(dtype)
        name = _NAMES.get(text.rsplit(".", 1)[-1])   # "torch.float16" -> "float16"
    if name not in ("f8e4m3fn", "f16", "bf16", "f32", "i32"):
        raise TypeError(f"no tessel element type for {dtype!r} (use f16, bf16, f32 or i32)")
    return name


def torch_module():
    """torch if the program imported it (tessel never imports torch itself)."""
    return sys.modules.get("torch")


def is_torch_tensor(value):
    torch = torch_module()
    return torch is not None and isinstance(value, torch.Tensor)


def torch_dtype_name(t):
    global _TORCH_DTYPES
    if _TORCH_DTYPES is None:
        torch = torch_module()
        _TORCH_DTYPES = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32",
                         torch.int32: "i32"}
        if hasattr(torch, "float8_e4m3fn"):
            _TORCH_DTYPES[torch.float8_e4m3fn] = "f8e4m3fn"
    d = _TORCH_DTYPES.get(t.dtype)
    if d is None:
        raise TypeError(f"tensors of {t.dtype} are not supported: use float16, bfloat16, float32, "
                        "int32 or float8_e4m3fn")
    return d


def stream_source():
    """What the launcher asks for the stream: torch's current raw stream of the device when
    torch is imported (a callable device -> CUstream), else 0 (the legacy default stream)."""
    torch = torch_module()
    if torch is not None:
        get = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if get is not None:
            return get
    return 0


# --- devices -----------------------------------------------------------------------------------

_lock = threading.Lock()
_chips = {}


class GpuUnavailableError(RuntimeError):
    """Device arguments were passed, but no CUDA driver or device can run them."""


def _tessel():
    from . import _tessel
    return _tessel


def device_count():
    """(count, reason): the CUDA devices the driver sees; reason says why when there are none."""
    return tuple(_tessel().cuda_status())


def chip_of(device):
    """The chip tessel compiles for on CUDA device `device` (sm_90a from 9.0, sm_80 from 8.0)."""
    chip = _chips.get(device)
    if chip is not None:
        return chip
    count, reason = device_count()
    if count == 0:
        raise GpuUnavailableError(f"tessel cannot run on the GPU: {reason}")
    name, major, minor = _tessel().cuda_device_info(device)
    if major >= 9:
        chip = "sm_90a"
    elif major >= 8:
        chip = "sm_80"
    else:
        raise GpuUnavailableError(f"cuda:{device} ({name}) is compute capability {major}.{minor}: "
                                  "tessel needs 8.0 or newer")
    _chips[device] = chip
    return chip


def scratch_f32(pool, like, n, zeros=False):
    """At least n float32 elements on like's device from pool (device index -> [(elements,
    tensor)], the last the largest), zero-filled once when zeros. For buffers a call writes and
    nobody reads (an LSE not asked for) or reads and nobody writes (a dlse of zeros): one
    allocation per growth instead of one per call. Buffers are never freed: a kernel on another
    stream may still use a smaller one, and the caching allocator would hand its memory to the
    next allocation on the stream it was made on without waiting. Growth doubles, so what is
    held is at most twice the largest request."""
    dev = like.get_device()
    held = pool.get(dev)
    if held is not None and held[-1][0] >= n:
        return held[-1][1]
    size = max(n, 2 * held[-1][0]) if held else n
    torch = torch_module()
    make = torch.zeros if zeros else torch.empty
    buf = make((size,), dtype=torch.float32, device=like.device)
    pool.setdefault(dev, []).append((size, buf))
    return buf


# --- launchers ---------------------------------------------------------------------------------

_launchers = {}


def launcher(binary, params):
    """The Launcher of a GpuBinary (one per cache key and process); params [(name, kind, dtype)]."""
    with _lock:
        hit = _launchers.get(binary.key)
        if hit is None:
            hit = _tessel().Launcher(binary.name, binary.cubin, tuple(binary.block),
                                     int(binary.dynamic_shared_bytes),
                                     [(n, k, d) for n, k, d in params])
            _launchers[binary.key] = hit
        return hit


def device_of(value):
    """The CUDA device ordinal of a device argument, -1 for host memory."""
    if isinstance(value, DevicePointer):
        return value.device
    return value.get_device()
