"""Runs tile-optimized causal attention cubins on a GPU and checks them against a host reference.

Exercises the shared-memory plan for real: the buffers that share bytes must never be read after
another value overwrote them, and kernels above 48 KiB must run on dynamic shared memory
(cuFuncSetAttribute + sharedMemBytes at launch). Pure Python (ctypes), no numpy, no toolkit:

    python3 test/gpu/run_attention.py CUBIN:BLOCK_M:DYNAMIC_SMEM_BYTES ...

with the numbers tesselc --ptxas-report prints (`kernel attention: block 128x1x1, N bytes
dynamic smem`). Kernels of test/python/attention_kernels.py, f16, head_dim 64, block_m = block_n.
"""
import ctypes
import math
import random
import struct
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from run_examples import Device, check, cuda, f16_round  # noqa: E402

MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


def reference(q, k, v, nq, nk, d, h, scale):
    """o [h, nq, d] and lse [h, nq], causal (q_idx >= kv_idx), one key/value head."""
    o, lse = [], []
    for hh in range(h):
        for i in range(nq):
            s = [scale * sum(q[(hh * nq + i) * d + t] * k[j * d + t] for t in range(d))
                 for j in range(min(i + 1, nk))]
            m = max(s)
            e = [math.exp(x - m) for x in s]
            l = sum(e)
            o.extend(sum(e[j] / l * v[j * d + t] for j in range(len(e))) for t in range(d))
            lse.append(m + math.log(l))
    return o, lse


def run(dev, cubin, block_m, dyn_smem):
    nq = nk = 50  # partial last blocks: padding, the in-range mask and the diagonal split
    d, h, hkv = 64, 2, 1
    rnd = random.Random(block_m)
    q = f16_round([rnd.uniform(-1, 1) for _ in range(h * nq * d)])
    k = f16_round([rnd.uniform(-1, 1) for _ in range(hkv * nk * d)])
    v = f16_round([rnd.uniform(-1, 1) for _ in range(hkv * nk * d)])
    scale = 1 / math.sqrt(d)
    pack = lambda xs: struct.pack(f"{len(xs)}e", *xs)  # noqa: E731
    bufs = [dev.upload(pack(q)), dev.upload(pack(k)), dev.upload(pack(v)),
            dev.upload(bytes(2 * h * nq * d)), dev.upload(bytes(4 * h * nq))]
    args = bufs + [ctypes.c_int32(nq), ctypes.c_int32(nk), ctypes.c_int32(h), ctypes.c_int32(hkv),
                   ctypes.c_float(scale), ctypes.c_int32(0)]
    image = open(cubin, "rb").read()
    module, func = ctypes.c_void_p(), ctypes.c_void_p()
    check(cuda.cuModuleLoadData(ctypes.byref(module), image), f"load {cubin}")
    check(cuda.cuModuleGetFunction(ctypes.byref(func), module, b"attention"), "get function")
    if dyn_smem > 48 * 1024:
        check(cuda.cuFuncSetAttribute(func, MAX_DYNAMIC_SHARED_SIZE_BYTES, dyn_smem),
              "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")
    params = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.byref(a), ctypes.c_void_p)
                                             for a in args])
    grid = ((nq + block_m - 1) // block_m, h, 1)
    check(cuda.cuLaunchKernel(func, *grid, 128, 1, 1, dyn_smem, None, params, None), "launch")
    check(cuda.cuCtxSynchronize(), "synchronize")
    o = struct.unpack(f"{h * nq * d}e", dev.download(bufs[3], 2 * h * nq * d))
    lse = struct.unpack(f"{h * nq}f", dev.download(bufs[4], 4 * h * nq))
    ro, rlse = reference(q, k, v, nq, nk, d, h, scale)
    err_o = max(abs(a - b) for a, b in zip(o, ro))
    err_l = max(abs(a - b) for a, b in zip(lse, rlse))
    ok = err_o < 2e-2 and err_l < 1e-2
    print(f"{'ok  ' if ok else 'FAIL'} {cubin} block {block_m} dynamic smem {dyn_smem}: "
          f"max |o - ref| {err_o:.2e}, max |lse - ref| {err_l:.2e}")
    return ok


def main():
    dev = Device()
    print(f"compute capability {dev.cc[0]}.{dev.cc[1]}")
    results = []
    for spec in sys.argv[1:]:
        cubin, block_m, dyn = spec.split(":")
        results.append(run(dev, cubin, int(block_m), int(dyn)))
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
