"""Runs the bundled examples' cubins on a GPU and checks them against a host reference.

Only where a GPU is (lit skips test/gpu): `python3 test/gpu/run_examples.py build/example`.
libcuda is opened at run time through ctypes; no numpy, no CUDA toolkit needed.
"""
import ctypes
import math
import random
import struct
import sys

cuda = ctypes.CDLL("libcuda.so.1")


def check(rc, what):
    if rc != 0:
        raise RuntimeError(f"{what} failed with CUDA error {rc}")


def f16_round(values):
    return list(struct.unpack(f"{len(values)}e", struct.pack(f"{len(values)}e", *values)))


class Device:
    def __init__(self):
        check(cuda.cuInit(0), "cuInit")
        dev = ctypes.c_int()
        check(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
        major, minor = ctypes.c_int(), ctypes.c_int()
        check(cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, dev), "cc major")
        check(cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev), "cc minor")
        self.cc = (major.value, minor.value)
        self.ctx = ctypes.c_void_p()
        check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), dev), "ctx retain")
        check(cuda.cuCtxSetCurrent(self.ctx), "ctx set")

    def upload(self, data: bytes):
        ptr = ctypes.c_uint64()
        check(cuda.cuMemAlloc_v2(ctypes.byref(ptr), max(len(data), 4)), "cuMemAlloc")
        check(cuda.cuMemcpyHtoD_v2(ptr, data, len(data)), "HtoD")
        return ptr

    def download(self, ptr, size):
        buf = ctypes.create_string_buffer(size)
        check(cuda.cuMemcpyDtoH_v2(buf, ptr, size), "DtoH")
        return buf.raw

    def launch(self, cubin_path, name, grid, block, args):
        image = open(cubin_path, "rb").read()
        module, func = ctypes.c_void_p(), ctypes.c_void_p()
        check(cuda.cuModuleLoadData(ctypes.byref(module), image), f"load {cubin_path}")
        check(cuda.cuModuleGetFunction(ctypes.byref(func), module, name.encode()), "get function")
        params = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.byref(a), ctypes.c_void_p)
                                                 for a in args])
        check(cuda.cuLaunchKernel(func, *grid, *block, 0, None, params, None), "launch")
        check(cuda.cuCtxSynchronize(), "synchronize")


def softmax_rows(dev, cubin):
    n, d = 37, 50  # partial row block and partial columns: padding and dropping are exercised
    rng = random.Random(0)
    x = f16_round([rng.uniform(-4, 4) for _ in range(n * d)])
    for c in range(d):  # one fully masked row
        x[5 * d + c] = -math.inf
    xs = dev.upload(struct.pack(f"{n * d}e", *x))
    ps = dev.upload(bytes(2 * n * d))
    ls = dev.upload(bytes(4 * n))
    dev.launch(cubin, "softmax_rows", ((n + 15) // 16, 1, 1), (128, 1, 1),
               [xs, ps, ls, ctypes.c_int32(n), ctypes.c_int32(d)])
    p = struct.unpack(f"{n * d}e", dev.download(ps, 2 * n * d))
    lse = struct.unpack(f"{n}f", dev.download(ls, 4 * n))
    worst = 0.0
    for r in range(n):
        row = x[r * d:(r + 1) * d]
        m = max(row)
        if m == -math.inf:
            assert all(v == 0 for v in p[r * d:(r + 1) * d]) and lse[r] == -math.inf, r
            continue
        s = sum(math.exp(v - m) for v in row)
        for c in range(d):
            worst = max(worst, abs(p[r * d + c] - math.exp(row[c] - m) / s))
        assert abs(lse[r] - (m + math.log(s))) < 1e-3, (r, lse[r], m + math.log(s))
    assert worst < 2e-3, worst
    return f"max |p - ref| = {worst:.2e}"


def matmul(dev, cubin):
    m, n, k = 45, 38, 40
    rng = random.Random(1)
    a = f16_round([rng.uniform(-1, 1) for _ in range(m * k)])
    b = f16_round([rng.uniform(-1, 1) for _ in range(k * n)])
    da, db = dev.upload(struct.pack(f"{m * k}e", *a)), dev.upload(struct.pack(f"{k * n}e", *b))
    dc = dev.upload(bytes(4 * m * n))
    dev.launch(cubin, "matmul", ((m + 31) // 32, (n + 31) // 32, 1), (128, 1, 1),
               [da, db, dc, ctypes.c_int32(m), ctypes.c_int32(n), ctypes.c_int32(k)])
    c = struct.unpack(f"{m * n}f", dev.download(dc, 4 * m * n))
    worst = max(abs(c[i * n + j] - sum(a[i * k + t] * b[t * n + j] for t in range(k)))
                for i in range(m) for j in range(n))
    assert worst < 1e-3, worst
    return f"max |c - ref| = {worst:.2e}"


def main(folder):
    dev = Device()
    chip = "sm_90a" if dev.cc >= (9, 0) else "sm_80"
    for name, fn in [("softmax_rows", softmax_rows), ("matmul", matmul)]:
        print(f"{name} ({chip}): ok, {fn(dev, f'{folder}/{name}.{chip}.cubin')}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build/example")
