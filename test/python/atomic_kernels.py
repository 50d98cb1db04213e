"""Kernels that add into memory with tl.atomic_add, shared by test_dsl_atomic_add.py (the
interpreter) and test/gpu/test_atomic_add_gpu.py (the GPU)."""
import tessel
from tessel import language as tl


@tessel.jit
def overlapping(x, out, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """Program p adds rows [p, p + BLOCK) of x [n, W] into the same rows of out: row r gets
    min(r + 1, BLOCK) adds from different programs; the last programs run past n (dropped)."""
    p = tl.program_id(0)
    xd = tl.make_desc(x, shape=(n, W), strides=(W, 1))
    od = tl.make_desc(out, shape=(n, W), strides=(W, 1))
    tl.atomic_add(od, (p, 0), tl.load(xd, (p, 0), shape=(BLOCK, W)))


@tessel.jit
def histogram(keys, counts, n, bins, BLOCK: tl.constexpr):
    """counts[keys[i]] += 1 for the keys of this program's block; keys outside [0, bins) and
    past n are not counted (the mask and the bounds)."""
    p = tl.program_id(0)
    kd = tl.make_desc(keys, shape=(n,), strides=(1,))
    cd = tl.make_desc(counts, shape=(bins,), strides=(1,))
    for i in range(0, BLOCK):
        k = tl.load_scalar(kd, (p * BLOCK + i,), padding=-1)
        ok = tl.full((1,), (k >= 0) & (k < bins), tl.int1)
        tl.atomic_add(cd, (tl.maximum(k, 0),), tl.full((1,), 1, tl.int32), mask=ok)
