"""Small kernels the launch-path tests share: test_gpu_dispatch.py in process, launch_worker.py
in a subprocess on the fake driver, and on a GPU test/gpu/test_python_gpu.py and
test/gpu/bench_launch.py (which put this folder on sys.path)."""
import tessel
from tessel import language as tl


@tessel.jit
def scale_shift(x, y, n, a, b, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    xd = tl.make_desc(x, shape=(n,), strides=(1,))
    yd = tl.make_desc(y, shape=(n,), strides=(1,))
    t = tl.load(xd, (pid * BLOCK,), shape=(BLOCK,))
    tl.store(yd, (pid * BLOCK,), t * a + b)


@tessel.jit
def with_defaults(x, y, n, a=2.0, *, BLOCK: tl.constexpr = 4):
    d = tl.make_desc(x, shape=(n,), strides=(1,))
    e = tl.make_desc(y, shape=(n,), strides=(1,))
    pid = tl.program_id(0)
    tl.store(e, (pid * BLOCK,), tl.load(d, (pid * BLOCK,), shape=(BLOCK,)) * a)
