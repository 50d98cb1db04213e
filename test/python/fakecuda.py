"""The fake CUDA driver (test/FakeCuda) and a stand-in torch module, for tests and for
`bench_launch.py --fake-driver` on a machine without a GPU or torch.

    import fakecuda
    drv = fakecuda.install()     # before tessel first opens the driver: sets TESSEL_LIBCUDA
    torch = fakecuda.fake_torch()  # a minimal `torch` in sys.modules (only when torch is absent)

The driver is opened once per process, so a process that uses it uses it throughout (the
pytest tests run their checks in a subprocess).
"""
import ctypes
import os
import pathlib
import sys
import types

ROOT = pathlib.Path(__file__).resolve().parents[2]


def library_path():
    build = pathlib.Path(os.environ.get("TESSEL_BUILD_DIR", ROOT / "build"))
    return build / "lib" / "libtessel_fake_cuda.so"


class FakeDriver:
    """ctypes view of the fake driver's read-back functions."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(str(path))   # the same handle tessel's dlopen gets
        u64 = ctypes.c_uint64
        for name, res, args in (("device_address", u64, [ctypes.c_int, u64]),
                                ("launches", u64, []), ("pointer_queries", u64, []),
                                ("modules_loaded", u64, []), ("record", None, [ctypes.c_int]),
                                ("last", None, [ctypes.POINTER(u64)]),
                                ("fail_next_launch", None, [ctypes.c_int]),
                                ("current_context", ctypes.c_void_p, [])):
            fn = getattr(self.lib, "tessel_fake_cuda_" + name)
            fn.restype, fn.argtypes = res, args
            setattr(self, name, fn)
        self.recorded = 0

    def record_params(self, n):
        self.recorded = n
        self.record(n)

    def last_launch(self):
        buf = (ctypes.c_uint64 * (9 + 64))()
        self.last(buf)
        return {"function": buf[0], "stream": buf[1], "grid": tuple(buf[2:5]),
                "block": tuple(buf[5:8]), "shared": buf[8],
                "slots": list(buf[9:9 + self.recorded])}


def install():
    """Points tessel at the fake driver (must run before tessel first opens a driver)."""
    path = library_path()
    if not path.exists():
        raise RuntimeError(f"no fake driver at {path}: build the tessel_fake_cuda target")
    os.environ["TESSEL_LIBCUDA"] = str(path)
    return FakeDriver(path)


def slot_i32(slot):
    return ctypes.c_int32(slot & 0xFFFFFFFF).value


def slot_f32(slot):
    return ctypes.c_float.from_buffer_copy((slot & 0xFFFFFFFF).to_bytes(4, "little")).value


class FakeDtype:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"torch.{self.name}"

    __str__ = __repr__


def fake_torch(driver=None):
    """A minimal torch module in sys.modules: tensors with dtype, data_ptr(), is_cuda,
    get_device(), shape, is_contiguous(), stride() — what tessel reads. CUDA tensors get addresses the fake
    driver knows as device memory of their device (host ones an address it does not)."""
    torch = types.ModuleType("torch")
    torch.__fake__ = True
    for name in ("float16", "bfloat16", "float32", "int32", "float64"):
        setattr(torch, name, FakeDtype(name))
    sizes = {"float16": 2, "bfloat16": 2, "float32": 4, "int32": 4, "float64": 8}
    state = {"next": 0}

    class Tensor:
        __slots__ = ("shape", "dtype", "is_cuda", "ptr", "device", "_contiguous")
        requires_grad = False

        def __init__(self, shape, dtype, device="cuda:0", ptr=None, contiguous=True):
            self.shape, self.dtype = tuple(shape), dtype
            self.is_cuda = device.startswith("cuda")
            self.device = device
            self._contiguous = contiguous
            if ptr is None:
                n = 1
                for s in self.shape:
                    n *= s
                offset = state["next"]
                state["next"] += (n * sizes[dtype.name] + 255) // 256 * 256 + 256
                if self.is_cuda and driver is not None:
                    ordinal = int(device.split(":")[1]) if ":" in device else 0
                    ptr = driver.device_address(ordinal, offset)
                else:
                    ptr = 0x10000000 + offset        # not device memory
            self.ptr = ptr

        def data_ptr(self):
            return self.ptr

        def get_device(self):
            return int(self.device.split(":")[1]) if self.is_cuda else -1

        def is_contiguous(self):
            return self._contiguous

        @property
        def ndim(self):
            return len(self.shape)

        def stride(self):
            """Row-major strides (a non-contiguous fake has no real layout: it is copied)."""
            out, n = [], 1
            for d in reversed(self.shape):
                out.append(n)
                n *= d
            return tuple(reversed(out)) if self._contiguous else tuple(0 for _ in self.shape)

        def contiguous(self):
            return Tensor(self.shape, self.dtype, self.device)

        def new_empty(self, shape, dtype=None):
            return Tensor(shape, dtype or self.dtype, self.device)

    torch.Tensor = Tensor
    torch.empty_like = lambda t: Tensor(t.shape, t.dtype, t.device)
    torch.empty = lambda shape, dtype=None, device="cuda:0": Tensor(shape, dtype or torch.float32,
                                                                    str(device))
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: 0)
    # The fake devices are compute capability 9.0 with the H200's 132 SMs (the split-KV
    # heuristic asks).
    torch.cuda = types.SimpleNamespace(get_device_properties=lambda device: types.SimpleNamespace(
        multi_processor_count=132))
    sys.modules["torch"] = torch
    return torch
