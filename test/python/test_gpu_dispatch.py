"""The GPU launch path without a GPU: the C++ argument packing plan, the dispatch between the
interpreter and the GPU, the cheap launch key, and clear errors when device memory is passed
but no driver can run it. (test/gpu/test_python_gpu.py runs the real thing on a GPU.)
"""
import importlib
import inspect
import os
import subprocess
import sys
import types

import numpy as np
import pytest

import tessel
from tessel import _tessel
from tessel import language as tl
from tessel import gpu, mod_functions, runtime

NO_GPU = _tessel.cuda_status()[0] == 0
needs_no_gpu = pytest.mark.skipif(not NO_GPU, reason="a CUDA device is present")

from launch_kernels import scale_shift, with_defaults  # noqa: E402


PARAMS = [("p", "ptr", "f16"), ("n", "scalar", "i32"), ("s", "scalar", "f32")]


def make_launcher(params=PARAMS, shared=0):
    return _tessel.Launcher("k", b"not a cubin", (128, 1, 1), shared, params)


class HasDataPtr:
    def __init__(self, p):
        self.p = p

    def data_ptr(self):
        return self.p


# --- the packing plan --------------------------------------------------------------------------

def test_plan_and_packing():
    L = make_launcher()
    assert L.plan == ["ptr:f16", "i32", "f32"]
    assert L.block == [128, 1, 1] or tuple(L.block) == (128, 1, 1)
    grid, values = L.pack((3, 2), 0x7F0000001000, 5, 0.1)
    assert grid == (3, 2, 1)
    assert values[0] == 0x7F0000001000 and values[1] == 5
    assert values[2] == float(np.float32(0.1)) and values[2] != 0.1      # rounded to f32
    assert L.pack(7, HasDataPtr(4096), np.int64(-3), 2)[1] == [4096, -3, 2.0]
    assert L.pack([1, 1, 9], tessel.DevicePointer(8192, "f16"), True, 1.5)[0] == (1, 1, 9)
    assert L.pack((2, 0), 0, 0, 0.0)[0] == (2, 0, 1)                    # an empty grid packs


def test_packing_errors():
    L = make_launcher()
    with pytest.raises(OverflowError, match="'n' = 4294967296 does not fit in an i32"):
        L.pack(1, 0, 2 ** 32, 1.0)
    with pytest.raises(TypeError, match="argument 'p': expected a CUDA tensor"):
        L.pack(1, object(), 1, 1.0)
    with pytest.raises(TypeError, match="argument 'n': expected an int"):
        L.pack(1, 0, "3", 1.0)
    with pytest.raises(TypeError):
        L.pack(1, 0, 1, "x")
    with pytest.raises(TypeError, match="takes 3 run-time arguments on the GPU, got 2"):
        L.pack(1, 0, 1)
    with pytest.raises(ValueError, match="1 to 3 sizes"):
        L.pack((1, 1, 1, 1), 0, 1, 1.0)
    with pytest.raises(ValueError, match="between 0 and"):
        L.pack((-1,), 0, 1, 1.0)
    with pytest.raises(TypeError, match="a grid is an int or a tuple"):
        L.pack("grid", 0, 1, 1.0)
    with pytest.raises(ValueError, match="cannot pass a scalar of f16"):
        make_launcher([("x", "scalar", "f16")])


def test_launch_builtin_is_bound_and_keeps_the_launcher_alive():
    L = make_launcher()
    launch = L.launch
    del L
    import gc
    gc.collect()
    assert launch.__name__ == "launch"
    # An empty grid launches nothing: no driver needed, the arguments are still checked.
    assert launch((0, 4), 0, 0, 1, 1.0) is None
    with pytest.raises(OverflowError):
        launch((0,), 0, 0, 2 ** 40, 1.0)


def test_kernel_plan_matches_its_signature():
    x = np.zeros(8, np.float32)
    kernel = scale_shift.warmup(x, x, 8, 1.0, 2.0, BLOCK=4)
    assert kernel.params == [("x", "ptr", "f32"), ("y", "ptr", "f32"), ("n", "scalar", "i32"),
                             ("a", "scalar", "f32"), ("b", "scalar", "f32")]
    L = _tessel.Launcher("scale_shift", b"x", (128, 1, 1), 0, kernel.params)
    assert L.plan == ["ptr:f32", "ptr:f32", "i32", "f32", "f32"]


# --- dispatch ----------------------------------------------------------------------------------

def test_numpy_runs_on_the_interpreter_through_the_cheap_key():
    x = np.arange(10, dtype=np.float32)
    y = np.zeros_like(x)
    scale_shift._fast_clear()
    scale_shift[(3,)](x, y, 10, 2.0, 1.0, BLOCK=4)
    np.testing.assert_allclose(y, x * 2 + 1)
    assert scale_shift._fast_size() == 1
    y[:] = 0
    scale_shift[lambda meta: (-(-meta["n"] // meta["BLOCK"]),)](x, y, 10, 3.0, 0.5, BLOCK=4)
    np.testing.assert_allclose(y, x * 3 + 0.5)
    assert scale_shift._fast_size() == 1      # a hit: same types, float ranges and constexprs
    scale_shift[(5,)](x, y, 10, 2.0, 1.0, BLOCK=2)
    assert scale_shift._fast_size() == 2
    scale_shift[(5,)](x, y, np.int32(10), 2.0, 1.0, BLOCK=2)    # another scalar type: a new key
    assert scale_shift._fast_size() == 3 and len(scale_shift.cache) == 2


def test_constexprs_equal_across_types_are_distinct_keys():
    x = np.arange(8, dtype=np.float32)
    y = np.zeros_like(x)
    scale_shift._fast_clear()
    scale_shift[(2,)](x, y, 8, 1.0, 0.0, BLOCK=4)
    with pytest.raises(tessel.CompilationError):
        scale_shift[(2,)](x, y, 8, 1.0, 0.0, BLOCK=4.0)     # not a hit on the BLOCK=4 entry
    assert scale_shift._fast_size() == 1


def test_defaults_and_keyword_only_parameters():
    x = np.arange(8, dtype=np.float32)
    y = np.zeros_like(x)
    with_defaults[(2,)](x, y, 8)
    np.testing.assert_allclose(y, x * 2)
    with_defaults[(4,)](x, y, 8, 3.0, BLOCK=2)
    np.testing.assert_allclose(y, x * 3)
    with pytest.raises(TypeError):
        with_defaults[(2,)](x, y)                         # Python binds: n is missing


def test_unhashable_constexpr_is_a_type_error():
    x = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match="must be hashable"):
        scale_shift[(1,)](x, x, 4, 1.0, 0.0, BLOCK=[4])


def test_mixed_host_and_device_arguments_are_refused():
    x = np.zeros(8, np.float32)
    with pytest.raises(TypeError, match="not a mix"):
        scale_shift[(1,)](x, tessel.DevicePointer(4096, "f32"), 8, 1.0, 0.0, BLOCK=8)


def test_backend_option_refuses_the_other_kind():
    k = tessel.jit(scale_shift.fn, options=tessel.CompileOptions(backend="interpreter"))
    with pytest.raises(TypeError, match="backend='interpreter'"):
        k[(1,)](tessel.DevicePointer(4096, "f32"), tessel.DevicePointer(8192, "f32"), 8, 1.0,
                0.0, BLOCK=8)
    with pytest.raises(ValueError, match="unknown backend"):
        tessel.CompileOptions(backend="tpu")


def test_device_pointer():
    p = tessel.DevicePointer(0x1000, tl.bfloat16, device=1)
    assert (p.data_ptr(), p.dtype, p.get_device()) == (0x1000, "bf16", 1)
    assert tessel.DevicePointer(1, "float16").dtype == "f16"
    assert tessel.DevicePointer(1, np.float32).dtype == "f32"
    with pytest.raises(TypeError, match="no tessel element type"):
        tessel.DevicePointer(1, "float64")
    with pytest.raises(ValueError):
        tessel.DevicePointer(-1, "f32")


@needs_no_gpu
def test_device_memory_without_a_driver_is_a_clear_error():
    p, q = tessel.DevicePointer(4096, "f32"), tessel.DevicePointer(8192, "f32")
    with pytest.raises(tessel.GpuUnavailableError, match="cannot run on the GPU: no CUDA driver"):
        scale_shift[(1,)](p, q, 8, 1.0, 0.0, BLOCK=8)
    count, reason = gpu.device_count()
    assert count == 0 and "libcuda" in reason
    L = make_launcher()
    with pytest.raises(_tessel.CudaError, match="no CUDA driver"):
        L.launch((1,), 0, 4096, 1, 1.0)
    assert issubclass(_tessel.CudaError, RuntimeError)


def test_the_stub_driver_is_named():
    stub = "/usr/local/cuda/lib64/stubs/libcuda.so"
    if not os.path.exists(stub):
        pytest.skip("no CUDA stub library")
    code = ("import tessel\n"
            "try:\n"
            "    tessel.gpu.chip_of(0)\n"
            "except tessel.GpuUnavailableError as e:\n"
            "    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, TESSEL_LIBCUDA=stub), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "stub library, not a driver" in r.stdout


# --- torch tensors (a stand-in torch module: CI has no torch) ----------------------------------

class FakeDtype:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"torch.{self.name}"

    __str__ = __repr__


@pytest.fixture
def fake_torch(monkeypatch):
    torch = types.ModuleType("torch")
    for name in ("float16", "bfloat16", "float32", "int32", "float64"):
        setattr(torch, name, FakeDtype(name))

    class Tensor:
        def __init__(self, shape, dtype, cuda=True, ptr=0x7F0000000000):
            self.shape, self.dtype, self.is_cuda, self.ptr = tuple(shape), dtype, cuda, ptr
            self.device = "cuda:0" if cuda else "cpu"

        def data_ptr(self):
            return self.ptr

        def get_device(self):
            return 0 if self.is_cuda else -1

        def is_contiguous(self):
            return True

        def new_empty(self, shape, dtype=None):
            return Tensor(shape, dtype or self.dtype, self.is_cuda)

    torch.Tensor = Tensor
    torch.empty_like = lambda t: Tensor(t.shape, t.dtype, t.is_cuda)
    torch.empty = lambda shape, dtype, device: Tensor(shape, dtype)
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: 0)
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(gpu, "_TORCH_DTYPES", None)
    yield torch


def test_torch_tensors_are_device_arguments(fake_torch):
    t = fake_torch.Tensor((8,), fake_torch.bfloat16)
    assert runtime.classify("x", t) == ("ptr", "bf16")
    assert runtime.where_is("x", t) == "cuda"
    with pytest.raises(TypeError, match="not supported"):
        runtime.classify("x", fake_torch.Tensor((8,), fake_torch.float64))
    with pytest.raises(TypeError, match="torch tensor on cpu"):
        runtime.classify("x", fake_torch.Tensor((8,), fake_torch.float32, cuda=False))
    assert gpu.stream_source()(0) == 0


@needs_no_gpu
def test_torch_attention_dispatches_to_the_gpu(fake_torch):
    T = fake_torch.Tensor
    q = T((1, 4, 100, 128), fake_torch.float16)
    k = T((1, 2, 77, 128), fake_torch.float16)
    for _ in range(2):   # the first call through _prepare_cuda, the second the lean path
        with pytest.raises(tessel.GpuUnavailableError, match="no CUDA driver"):
            tessel.attention(q, k, k, causal=True, enable_gqa=True)
    with pytest.raises(ValueError, match="enable_gqa"):
        tessel.attention(q, k, k)
    with pytest.raises(TypeError, match="differ in dtype"):
        tessel.attention(q, T((1, 4, 77, 128), fake_torch.bfloat16), k)
    # A CPU tensor beside CUDA ones (CPU tensors alone run on the interpreter: cpu_tensors).
    with pytest.raises(TypeError, match="on cpu"):
        tessel.attention(T((1, 1, 4, 64), fake_torch.float16),
                         T((1, 1, 4, 64), fake_torch.float16, cuda=False),
                         T((1, 1, 4, 64), fake_torch.float16))
    # What it would compile: the mma.sync block sizes, with three stages at d128 (attention.
    # GPU_STAGES: two spill a register); with a score_mod 64x64 and the default two.
    kernel = tessel.compile_attention(q, k, k, causal=True, enable_gqa=True)
    spec = {item[0]: item[-1] for item in kernel.specialization}
    assert (spec["BLOCK_M"], spec["BLOCK_N"], spec["D"]) == (128, 64, 128)
    assert kernel.options.num_stages == 3
    assert [p[2] for p in kernel.params[:5]] == ["f16", "f16", "f16", "f16", "f32"]
    kernel = tessel.compile_attention(q, k, k, enable_gqa=True,
                                      score_mod=lambda s, b, h, q_idx, kv_idx: s * 0.5)
    spec = {item[0]: item[-1] for item in kernel.specialization}
    assert (spec["BLOCK_M"], spec["BLOCK_N"], kernel.options.num_stages) == (64, 64, None)


@needs_no_gpu
def test_native_head_dim_reaches_the_launch_unpadded(fake_torch, monkeypatch):
    """With 192 listed for sm_90a, a d192 fp16 CUDA call goes through _prepare_cuda, then the
    lean path, to the launch with D = 192 (no driver here: GpuUnavailableError), never the
    padded path; the kernel it compiles is the 128x64 one. (Causal d192 runs persistent: the
    GPU test covers it.)"""
    attn = importlib.import_module("tessel.attention")
    monkeypatch.setattr(attn, "NATIVE_HEAD_DIMS", {"sm_90a": (192,)})
    monkeypatch.setattr(attn, "_chip_for_blocks", lambda q: "sm_90a")
    monkeypatch.setattr(attn, "_attention_padded",
                        lambda *a, **kw: pytest.fail("took the padded path"))
    q = fake_torch.Tensor((1, 2, 300, 192), fake_torch.float16)
    for _ in range(2):   # the first call through _prepare_cuda, the second the lean path
        with pytest.raises(tessel.GpuUnavailableError, match="no CUDA driver"):
            tessel.attention(q, q, q)
    kernel = tessel.compile_attention(q, q, q)
    spec = {item[0]: item[-1] for item in kernel.specialization}
    assert (spec["BLOCK_M"], spec["BLOCK_N"], spec["D"]) == (128, 64, 192)


@needs_no_gpu
@pytest.mark.parametrize("E,Ev,mod", [(128, 64, None), (192, 128, None), (64, 128, None),
                                      (128, 128, "softcap"), (192, 192, None), (64, 64, None),
                                      (96, 96, None), (40, 40, "softcap")])
def test_first_launch_passes_every_constexpr(fake_torch, monkeypatch, E, Ev, mod):
    """A signature's first CUDA call (through _prepare_cuda) launches with every constexpr it
    prepared, persistent or not: that launch lists them one by one, and it once dropped DV, so
    the GPU ran the D-wide kernel over a narrower v (all 40 GPU cases wrong on an H100,
    2026-12-06). v's own head dim never takes the padded route here (VALUE_HEAD_DIM_KERNEL)."""
    attn = importlib.import_module("tessel.attention")
    monkeypatch.setattr(attn, "VALUE_HEAD_DIM_KERNEL", True)
    monkeypatch.setattr(attn, "NATIVE_HEAD_DIMS", {"sm_90a": (192,)})
    monkeypatch.setattr(attn, "BLOCK_HEAD_DIM_CHIPS", ("sm_90a",))      # 96 and 40: DB
    monkeypatch.setattr(attn, "_chip_for_blocks", lambda q: "sm_90a")
    monkeypatch.setattr(attn, "call_with_value_head_dim",
                        lambda *a, **kw: pytest.fail("took the padded path"))
    monkeypatch.setattr(attn, "_attention_padded",
                        lambda *a, **kw: pytest.fail("took the padded path"))
    prepare, launched = attn._prepare_cuda, []

    def spy(*a, **kw):
        out = prepare(*a, **kw)
        params = [p.name for p in inspect.signature(out[-1].fn).parameters.values()]
        monkeypatch.setattr(out[-1], "_runner", lambda grid, *args: launched.append(
            (out[1], dict(zip(params, args)))))
        return out
    monkeypatch.setattr(attn, "_prepare_cuda", spy)
    from tessel import serving_decode
    monkeypatch.setitem(serving_decode._num_sms_cache, 0, 132)     # an H100's SMs
    T = fake_torch.Tensor
    monkeypatch.setattr(fake_torch, "from_numpy", lambda a: types.SimpleNamespace(
        to=lambda device: T(a.shape, fake_torch.int32)), raising=False)   # the tile schedule
    for causal in (False, True):
        q, k = T((1, 4, 300, E), fake_torch.float16), T((1, 2, 300, E), fake_torch.float16)
        tessel.attention(q, k, T((1, 2, 300, Ev), fake_torch.float16), causal=causal,
                         enable_gqa=True, softcap=20.0 if mod else None)
    assert len(launched) == 2
    for cx, got in launched:
        assert {n: got.get(n, "(not passed)") for n in cx} == cx
        assert (got["D"], got.get("DV") or E) == (E, Ev)
        assert got.get("DB", 0) == {96: 128, 40: 64}.get(E, 0)       # (DV 0 passed before it)


def _record_launches(attn, fake_torch, monkeypatch):
    """tessel.attention's CUDA launches on an H100's SM count with the fake torch: each as the
    dict of the kernel's parameters it passed, appended to the list returned (the kernels of
    cuda_kernel and persistent_kernel wrapped; the persistent schedule's tensors faked)."""
    launched = []

    class Recorder:
        def __init__(self, kernel):
            self.fn = kernel.fn
            self.params = [p.name for p in inspect.signature(kernel.fn).parameters.values()]

        def _runner(self, grid, *args):
            launched.append(dict(zip(self.params, args)))
    real_cuda, real_persistent = attn.cuda_kernel, attn.persistent_kernel
    monkeypatch.setattr(attn, "cuda_kernel", lambda *a: Recorder(real_cuda(*a)))
    monkeypatch.setattr(attn, "persistent_kernel", lambda *a: Recorder(real_persistent(*a)))
    from tessel import serving_decode
    monkeypatch.setitem(serving_decode._num_sms_cache, 0, 132)     # an H100's SMs
    T = fake_torch.Tensor
    monkeypatch.setattr(fake_torch, "from_numpy", lambda a: types.SimpleNamespace(
        to=lambda device: T(a.shape, fake_torch.int32)), raising=False)   # the tile schedule
    return launched


@needs_no_gpu
def test_block_head_dim_calls_take_the_lean_path_with_db(fake_torch, monkeypatch):
    """A DB call's signature is remembered as others are: its second call takes the lean path
    and launches with DB too (and D, the tensors' head dim), persistent or one a tile."""
    attn = importlib.import_module("tessel.attention")
    monkeypatch.setattr(attn, "BLOCK_HEAD_DIM_CHIPS", ("sm_90a",))
    monkeypatch.setattr(attn, "_chip_for_blocks", lambda q: "sm_90a")
    monkeypatch.setattr(attn, "_attention_padded",
                        lambda *a, **kw: pytest.fail("took the padded path"))
    monkeypatch.setattr(attn, "_cuda_configs", {})
    prepared, prepare = [], attn._prepare_cuda
    launched = _record_launches(attn, fake_torch, monkeypatch)
    monkeypatch.setattr(attn, "_prepare_cuda", lambda *a: prepared.append(1) or prepare(*a))
    T = fake_torch.Tensor
    q = T((1, 2, 300, 96), fake_torch.float16)
    for causal in (False, True):
        for _ in range(2):
            tessel.attention(q, q, q, causal=causal)
    assert len(prepared) == 2 and len(launched) == 4
    assert [(got["D"], got["DB"], got["DV"]) for got in launched] == [(96, 128, 0)] * 4


@needs_no_gpu
def test_causal_calls_launch_with_align_end(fake_torch, monkeypatch):
    """attention.ALIGN_QUERY_BLOCKS_TO_END: a causal call whose queries end in a short block
    launches with ALIGN_END on the first call and on the lean path's where its tiles then
    visit fewer key blocks (d64's 192-row blocks at 4096, whose schedule counts the shifted
    rows; d256's 128x64 at 1088), not at 64x64 (d128 below 1024 keys: more blocks masked than
    saved); whole blocks, calls that are not causal and calls with a score_mod launch without
    it."""
    attn = importlib.import_module("tessel.attention")
    monkeypatch.setattr(attn, "_chip_for_blocks", lambda q: "sm_90a")
    monkeypatch.setattr(attn, "_cuda_configs", {})
    monkeypatch.setattr(attn, "_schedules", {})
    launched = _record_launches(attn, fake_torch, monkeypatch)
    T = fake_torch.Tensor
    cases = [(64, 4096, True, None, True), (64, 4224, True, None, False),
             (64, 4096, False, None, False), (128, 1000, True, None, False),
             (256, 1088, True, None, True), (256, 1088, True, "softcap", False)]
    for D, N, causal, mod, align in cases:
        launched.clear()
        q = T((1, 2, N, D), fake_torch.float16)
        for _ in range(2):              # _prepare_cuda's launch, then the lean path's
            tessel.attention(q, q, q, causal=causal, softcap=20.0 if mod else None)
        assert [got["ALIGN_END"] for got in launched] == [align, align], (D, N, causal, mod)
    assert (0, 4096, 4096, 2, 192, 128, True, 44, True) in attn._schedules
    # d64 4096 causal: 22 blocks of 192 rows, the longest (4,096 keys: 32 blocks and the
    # prologue) first; aligned, the last is 64 rows over 64 keys, else 192 rows over 192.
    aligned = attn.dense_tile_costs(4096, 4096, 192, 128, True, True)
    assert (aligned[0], aligned[-1], len(aligned)) == (33, 2, 22)
    assert attn.dense_tile_costs(4096, 4096, 192, 128, True, False)[-1] == 3
    assert (attn.dense_tile_costs(4096, 4096, 192, 128, False, False) == 33).all()


def test_block_head_dim_route(fake_torch, monkeypatch):
    """attention.BLOCK_HEAD_DIM_CHIPS (sm_90a since its GPU check): a forward call that would be
    padded runs the dense kernels with DB, the padded head dim, on q, k and v as they are —
    with gradients only where the backward takes DB too (backward.BLOCK_HEAD_DIM_CHIPS), with
    a mask_mod that reads no tensor where BLOCK_HEAD_DIM_MASKS lets it through; not with a v of
    its own head dim, a head dim that is not a multiple of 8, or on a chip it does not list;
    those pad as before."""
    from tessel import backward
    attn = importlib.import_module("tessel.attention")
    assert attn.BLOCK_HEAD_DIM_CHIPS == backward.BLOCK_HEAD_DIM_CHIPS == ("sm_90a",)
    monkeypatch.setattr(attn, "BLOCK_HEAD_DIM_CHIPS", ())
    chip = ["sm_90a"]
    monkeypatch.setattr(attn, "_chip_for_blocks", lambda q: chip[0])
    routes = []
    monkeypatch.setattr(attn, "_attention_padded", lambda *a, **kw: routes.append("padded"))
    monkeypatch.setattr(attn, "_attention_cuda",
                        lambda *a, **kw: routes.append(kw.get("block_dim", 0)))
    T = fake_torch.Tensor

    def route(D, **kw):
        routes.clear()
        x = T((1, 2, 300, D), fake_torch.float16)
        tessel.attention(x, x, x, **kw)
        return routes[0]
    assert route(96) == "padded"
    monkeypatch.setattr(attn, "BLOCK_HEAD_DIM_CHIPS", ("sm_90a",))
    assert [route(d) for d in (96, 80, 40, 160, 128)] == [128, 128, 64, 256, 0]
    assert route(100) == "padded"                                    # not whole 16-byte chunks
    # attention.BLOCK_HEAD_DIM_MASKS (on since its GPU check): a mask_mod reading no tensor
    # takes DB (the dense kernel's MASK_MOD); one that reads a tensor does not (its calls are
    # block-sparse: test_block_head_dim_sparse_route).
    assert attn.BLOCK_HEAD_DIM_MASKS
    assert route(96, mask_mod=lambda b, h, i, j: i >= j) == 128
    monkeypatch.setattr(attn, "BLOCK_HEAD_DIM_SPARSE", False)
    table = np.zeros(4, bool)
    assert route(96, mask_mod=lambda b, h, i, j: table[i % 4]) == "padded"
    monkeypatch.setattr(attn, "BLOCK_HEAD_DIM_MASKS", False)
    assert route(96, mask_mod=lambda b, h, i, j: i >= j) == "padded"
    grad = T((1, 2, 300, 96), fake_torch.float16)
    grad.requires_grad = True
    monkeypatch.setattr(backward, "attention_with_grad",
                        lambda *a, **kw: routes.append(("grad", kw.get("block_dim", 0))))
    routes.clear()
    tessel.attention(grad, grad, grad)
    assert routes == [("grad", 128)]
    monkeypatch.setattr(backward, "BLOCK_HEAD_DIM_CHIPS", ())
    routes.clear()
    tessel.attention(grad, grad, grad)
    assert routes == ["padded"]
    chip[0] = "sm_80"
    assert route(96) == "padded"


def test_block_head_dim_sparse_route(fake_torch, monkeypatch):
    """attention.BLOCK_HEAD_DIM_SPARSE (on since its GPU check): a call at a head dim the fast
    paths pad, with a block_mask or a mask_mod that reads tensors (block-sparse at run time),
    runs the block-sparse kernel with DB on q, k and v as they are, with gradients where the
    backward takes DB too (backward.BLOCK_HEAD_DIM_CHIPS); asked-for blocks with a tensor mask
    (the dense kernel), a chip BLOCK_HEAD_DIM_CHIPS does not list, or the switch off pad as
    before."""
    from tessel import backward, blocksparse
    attn = importlib.import_module("tessel.attention")
    assert attn.BLOCK_HEAD_DIM_SPARSE
    monkeypatch.setattr(attn, "BLOCK_HEAD_DIM_SPARSE", False)
    chip = ["sm_90a"]
    monkeypatch.setattr(attn, "_chip_for_blocks", lambda q: chip[0])
    routes = []
    monkeypatch.setattr(attn, "_attention_padded", lambda *a, **kw: routes.append("padded"))
    monkeypatch.setattr(attn, "_attention_cuda", lambda *a, **kw: routes.append("dense"))
    monkeypatch.setattr(blocksparse, "attention",
                        lambda *a, **kw: routes.append(("sparse", kw.get("block_dim"))))
    monkeypatch.setattr(blocksparse, "runs_as_causal", lambda *a: False)
    monkeypatch.setattr(blocksparse, "auto_block_mask",
                        lambda q, k, c, m, g, block_dim=None: ("bm", m))
    T = fake_torch.Tensor
    table = np.zeros(4, bool)
    reads = lambda b, h, i, j: table[i % 4]                              # noqa: E731

    def route(D, grad=False, **kw):
        routes.clear()
        x = T((1, 2, 300, D), fake_torch.float16)
        x.requires_grad = grad
        tessel.attention(x, x, x, **kw)
        return routes[0]
    assert route(96, block_mask="bm") == route(96, mask_mod=reads) == "padded"
    monkeypatch.setattr(attn, "BLOCK_HEAD_DIM_SPARSE", True)
    assert route(96, block_mask="bm") == route(96, mask_mod=reads) == ("sparse", 128)
    assert route(40, mask_mod=reads) == ("sparse", 64)
    assert route(128, mask_mod=reads) == ("sparse", None)               # nothing to pad
    assert route(96, mask_mod=reads, block_m=64) == "padded"            # the dense kernel
    assert route(100, block_mask="bm") == "padded"                      # not 16-byte chunks
    # (with gradients, blocksparse.attention hands the call to attention_with_grad)
    assert route(96, grad=True, block_mask="bm") == ("sparse", 128)
    assert route(96, grad=True, mask_mod=reads) == ("sparse", 128)     # its block mask made
    monkeypatch.setattr(backward, "BLOCK_HEAD_DIM_CHIPS", ())
    assert route(96, grad=True, block_mask="bm") == "padded"
    assert route(96, block_mask="bm") == ("sparse", 128)
    monkeypatch.setattr(blocksparse, "auto_block_mask", lambda *a, **kw: None)
    assert route(96, mask_mod=reads) == "padded"                        # no block mask made
    monkeypatch.setattr(backward, "BLOCK_HEAD_DIM_CHIPS", ("sm_90a",))
    assert route(96, grad=True, mask_mod=reads) == "padded"
    chip[0] = "sm_80"
    assert route(96, block_mask="bm") == "padded"


def test_varlen_pads_inside_the_kernel(fake_torch, monkeypatch):
    """serving._varlen_block_dim (VARLEN_BLOCK_HEAD_DIM, on since its GPU check): a CUDA call that
    would be padded runs the varlen kernel with blocks that wide instead, unless v has a head
    dim of its own or D is not a multiple of 8; with gradients wanted only where
    VARLEN_BLOCK_HEAD_DIM_GRAD is on (since its GPU check) and the block-sparse backward takes
    that DB too (backward.sparse_block_dim: BLOCK_HEAD_DIM_SPARSE, the chip in
    BLOCK_HEAD_DIM_CHIPS)."""
    from tessel import backward, serving, serving_checks
    T = fake_torch.Tensor
    assert serving_checks.VARLEN_BLOCK_HEAD_DIM
    x = T((9, 2, 96), fake_torch.float16)
    assert serving._varlen_block_dim(x, x, x, 128)
    assert not serving._varlen_block_dim(x, x, x, None)
    assert not serving._varlen_block_dim(x, x, T((9, 2, 64), fake_torch.float16), 128)
    odd = T((9, 2, 100), fake_torch.float16)
    assert not serving._varlen_block_dim(odd, odd, odd, 128)
    grad = T((9, 2, 96), fake_torch.float16)
    grad.requires_grad = True
    assert serving_checks.VARLEN_BLOCK_HEAD_DIM_GRAD
    monkeypatch.setattr(serving_checks, "VARLEN_BLOCK_HEAD_DIM_GRAD", False)
    assert not serving._varlen_block_dim(grad, x, x, 128)
    monkeypatch.setattr(serving_checks, "VARLEN_BLOCK_HEAD_DIM_GRAD", True)
    attn = importlib.import_module("tessel.attention")
    chip = ["sm_90a"]
    monkeypatch.setattr(attn, "_chip_for_blocks", lambda q: chip[0])
    assert serving._varlen_block_dim(grad, x, x, 128)
    monkeypatch.setattr(attn, "BLOCK_HEAD_DIM_SPARSE", False)
    assert not serving._varlen_block_dim(grad, x, x, 128)
    monkeypatch.setattr(attn, "BLOCK_HEAD_DIM_SPARSE", True)
    monkeypatch.setattr(backward, "BLOCK_HEAD_DIM_CHIPS", ())
    assert not serving._varlen_block_dim(grad, x, x, 128)
    monkeypatch.setattr(backward, "BLOCK_HEAD_DIM_CHIPS", ("sm_90a",))
    chip[0] = "sm_80"
    assert not serving._varlen_block_dim(grad, x, x, 128)
    assert serving._varlen_block_dim(x, x, x, 128)           # without gradients: either chip
    monkeypatch.setattr(serving_checks, "VARLEN_BLOCK_HEAD_DIM", False)
    assert not serving._varlen_block_dim(x, x, x, 128)


def test_varlen_pads_head_dims_to_its_fast_paths(fake_torch, monkeypatch):
    """attention_varlen's padded route on CUDA fp16/bf16 (serving._varlen_padded_dim): head dims
    below 128 but 64 go to 64 or 128; above 128 to 256 where VARLEN_FAST_HEAD_DIMS lists 256
    (as it does since its GPU check); fp32, 3-D shapes only, one head dim."""
    from tessel import serving, serving_checks
    T = fake_torch.Tensor

    def dim(D, dtype=fake_torch.float16, v_dim=None):
        return serving._varlen_padded_dim(T((9, 2, D), dtype), T((9, 2, D), dtype),
                                          T((9, 2, v_dim or D), dtype))
    assert [dim(d) for d in (32, 40, 63, 80, 96, 127)] == [64, 64, 64, 128, 128, 128]
    assert dim(96, fake_torch.float32) is None and dim(96, v_dim=64) is None
    assert serving_checks.VARLEN_FAST_HEAD_DIMS == (64, 128, 256)
    assert [dim(d) for d in (96, 160, 192, 255, 256)] == [128, 256, 256, 256, None]
    # 192 as it is on sm_90a where VARLEN_NATIVE_HEAD_DIMS lists it (on since its GPU check),
    # unless gradients are wanted (the varlen backward pads)
    attn = importlib.import_module("tessel.attention")
    chip = ["sm_90a"]
    monkeypatch.setattr(attn, "_chip_for_blocks", lambda q: chip[0])
    assert serving_checks.VARLEN_NATIVE_HEAD_DIMS == {"sm_90a": (192,)}
    assert [dim(d) for d in (160, 192)] == [256, None]
    grad = T((9, 2, 192), fake_torch.float16)
    grad.requires_grad = True
    assert serving._varlen_padded_dim(grad, grad, grad) == 256
    chip[0] = "sm_80"
    assert dim(192) == 256
    chip[0] = "sm_90a"
    monkeypatch.setattr(serving_checks, "VARLEN_NATIVE_HEAD_DIMS", {"sm_90a": ()})
    assert dim(192) == 256
    monkeypatch.setattr(serving_checks, "VARLEN_FAST_HEAD_DIMS", (64, 128))
    assert [dim(d) for d in (64, 128, 160, 192, 256)] == [None] * 5


def test_kvcache_fast_head_dims():
    """attention_with_kvcache's default blocks: the fast paths' 64x64 at the head dims
    KVCACHE_FAST_HEAD_DIMS lists (256 on since its GPU check), CUDA f16/bf16, 16-byte strides."""
    from tessel import serving_checks
    dims = serving_checks.KVCACHE_FAST_HEAD_DIMS
    assert dims == (64, 128, 256)
    fast = serving_checks._fast_blocks
    assert [fast("cuda", "f16", d, (512, 256), dims) for d in (64, 128, 256, 96)] == \
        [(64, 64), (64, 64), (64, 64), None]
    assert fast("cuda", "f16", 256, (512, 256), (64, 128)) is None
    assert fast("cuda", "bf16", 256, (512, 256), (64, 128, 256)) == (64, 64)
    assert fast("cuda", "f32", 256, (512, 256), (64, 128, 256)) is None
    assert fast("cuda", "f16", 256, (516, 256), (64, 128, 256)) is None    # not 16-byte rows
    assert fast("numpy", "f16", 256, (512, 256), (64, 128, 256)) is None


def test_gpu_block_sizes():
    from tessel.attention import gpu_blocks
    assert gpu_blocks(128, "f16", 1000, 1000) == (128, 64)
    assert gpu_blocks(128, "bf16", 7, 7) == (128, 64)
    assert gpu_blocks(64, "f16", 1000, 1000) == (128, 64)
    assert gpu_blocks(32, "f16", 10, 1000) == (16, 64)        # the reference lowering's choice
    assert gpu_blocks(64, "f32", 100, 100) == (64, 64)
    # The reference lowering past head dim 64: 32-row blocks (64 need more shared memory than a
    # CTA has at f32 d128).
    assert gpu_blocks(128, "f32", 1000, 1000) == (32, 32)
    assert gpu_blocks(128, "f32", 1000, 1000, "sm_90a") == (32, 32)
    assert gpu_blocks(96, "f16", 10, 1000) == (16, 32)
    # sm_90a (wgmma): one warpgroup of 64 query rows; 64 keys at d128, 128 at d64.
    assert gpu_blocks(128, "f16", 1000, 1000, "sm_90a") == (64, 64)
    # No mask (not causal, no mask_mod): two warpgroups over 128 keys at d128 on sm_90a only.
    assert gpu_blocks(128, "bf16", 1000, 1000, "sm_90a", unmasked=True) == (128, 128)
    assert gpu_blocks(128, "f16", 1000, 1000, "sm_80", unmasked=True) == (128, 64)
    assert gpu_blocks(64, "f16", 1000, 1000, "sm_90a", unmasked=True) == (64, 128)
    assert gpu_blocks(128, "bf16", 7, 7, "sm_90a") == (64, 64)
    assert gpu_blocks(64, "f16", 1000, 1000, "sm_90a") == (64, 128)
    # Causal without a mask_mod, from 1024 keys: 128x128 at d128 on sm_90a (warp-specialized).
    assert gpu_blocks(128, "f16", 2048, 2048, "sm_90a", causal=True) == (128, 128)
    assert gpu_blocks(128, "bf16", 16, 4096, "sm_90a", causal=True) == (128, 128)
    assert gpu_blocks(128, "f16", 1024, 1024, "sm_90a", causal=True) == (128, 128)
    assert gpu_blocks(128, "f16", 1023, 1023, "sm_90a", causal=True) == (64, 64)
    assert gpu_blocks(128, "f16", 4096, 4096, "sm_80", causal=True) == (128, 64)
    # No score_mod and no mask_mod, from 2048 queries and keys: 192x128 at d64 on sm_90a (three
    # consumer warpgroups), causal or not; a score_mod, fewer queries or keys, or sm_80 keep
    # 64x128 / 128x64.
    assert gpu_blocks(64, "f16", 2048, 2048, "sm_90a", unmasked=True, mods=False) == (192, 128)
    assert gpu_blocks(64, "bf16", 2048, 8192, "sm_90a", causal=True, mods=False) == (192, 128)
    assert gpu_blocks(64, "f16", 2047, 2047, "sm_90a", unmasked=True, mods=False) == (64, 128)
    assert gpu_blocks(64, "f16", 16, 8192, "sm_90a", unmasked=True, mods=False) == (64, 128)
    assert gpu_blocks(64, "f16", 4096, 4096, "sm_90a", unmasked=True) == (64, 128)
    assert gpu_blocks(64, "f16", 4096, 4096, "sm_80", mods=False) == (128, 64)
    assert gpu_blocks(128, "f16", 4096, 4096, "sm_90a", unmasked=True, mods=False) == (128, 128)
    assert gpu_blocks(64, "f16", 4096, 4096, "sm_90a", causal=True) == (64, 128)
    assert gpu_blocks(64, "f32", 100, 100, "sm_90a") == (64, 64)
    assert gpu_blocks(32, "f16", 10, 1000, "sm_90a") == (16, 64)
    # Head dim 256: 128x64 with wgmma (two warpgroups), 64x64 with mma.sync (163 KB).
    assert gpu_blocks(256, "f16", 1000, 1000, "sm_90a") == (128, 64)
    assert gpu_blocks(256, "bf16", 1000, 1000) == (64, 64)
    # ... and 128x32 on sm_90a with a score_mod or mask_mod (128x64 spills with any), not on
    # sm_80 (64x64 there) nor at other head dims.
    assert gpu_blocks(256, "f16", 1000, 1000, "sm_90a", mods=True) == (128, 32)
    assert gpu_blocks(256, "bf16", 4096, 4096, "sm_90a", causal=True, mods=True) == (128, 32)
    assert gpu_blocks(256, "f16", 1000, 1000, "sm_80", mods=True) == (64, 64)
    assert gpu_blocks(128, "f16", 1000, 1000, "sm_90a", mods=True) == (64, 64)
    # sm_80 d128 with a mod: 64x64 (128x64 spills 24-252 bytes there).
    assert gpu_blocks(128, "f16", 1000, 1000, "sm_80", mods=True) == (64, 64)
    assert gpu_blocks(128, "bf16", 4096, 4096, "sm_80", causal=True, mods=True) == (64, 64)


def test_head_dims_the_fast_paths_do_not_take_are_padded():
    """fp16/bf16 CUDA calls at a head dim below 256 other than 64/128/256 run at the next of
    these (zero columns); fp32, the fast head dims themselves and dims past 256 are not padded
    (test/gpu/test_python_gpu.py runs the padded calls and their gradients)."""
    from tessel.attention import padded_head_dim
    assert [padded_head_dim(d, "f16") for d in (16, 32, 48, 63)] == [64] * 4
    assert [padded_head_dim(d, "bf16") for d in (65, 80, 96, 112, 127)] == [128] * 5
    assert [padded_head_dim(d, "f16") for d in (160, 192, 255)] == [256] * 3
    assert [padded_head_dim(d, "f16") for d in (64, 128, 256, 257, 512, 0)] == [None] * 6
    assert padded_head_dim(96, "f32") is None


def test_native_head_dims_run_unpadded_where_listed(monkeypatch):
    """attention.NATIVE_HEAD_DIMS (192 on sm_90a since its GPU check): a listed head dim runs
    as it is on its chip, for forward calls in fp16/bf16 without a mask_mod or block_mask;
    gradients where the backward pads (backward.NATIVE_BACKWARD_HEAD_DIMS), masks, fp32, other
    chips and (NATIVE_STRIDED off; on since its GPU check) strided inputs keep padded_head_dim's
    answer."""
    attn = importlib.import_module("tessel.attention")
    assert attn.NATIVE_HEAD_DIMS == {"sm_90a": (192,)}      # on since its GPU check
    monkeypatch.setattr(attn, "NATIVE_HEAD_DIMS", {"sm_90a": ()})
    assert not attn.native_head_dim(192, "f16", "sm_90a", False, False)
    monkeypatch.setattr(attn, "NATIVE_HEAD_DIMS", {"sm_90a": (192,)})
    assert attn.native_head_dim(192, "f16", "sm_90a", False, False)
    assert attn.native_head_dim(192, "bf16", "sm_90a", False, False)
    assert not attn.native_head_dim(192, "f16", "sm_80", False, False)
    assert attn.native_head_dim(192, "f16", "sm_90a", True, False)     # the backward takes it
    bw = importlib.import_module("tessel.backward")
    monkeypatch.setattr(bw, "NATIVE_BACKWARD_HEAD_DIMS", {"sm_90a": ()})
    assert not attn.native_head_dim(192, "f16", "sm_90a", True, False)  # gradients: it would pad
    assert not attn.native_head_dim(192, "f16", "sm_90a", False, True)      # a mask
    assert not attn.native_head_dim(192, "f32", "sm_90a", False, False)
    assert attn.NATIVE_STRIDED
    assert attn.native_head_dim(192, "f16", "sm_90a", False, False, contiguous=False)
    monkeypatch.setattr(attn, "NATIVE_STRIDED", False)
    assert not attn.native_head_dim(192, "f16", "sm_90a", False, False, contiguous=False)
    assert not attn.native_head_dim(160, "f16", "sm_90a", False, False)
    assert attn.gpu_blocks(192, "f16", 4096, 4096, "sm_90a", unmasked=True) == (128, 64)


def test_plain_score_mod_functions_are_traced_once():
    from tessel.attention import _as_jit

    def bias(s, b, h, q, kv):
        return s
    assert _as_jit(bias, "score_mod") is _as_jit(bias, "score_mod")


@needs_no_gpu
def test_lambdas_made_per_call_do_not_grow_the_cuda_configs(fake_torch):
    att = sys.modules["tessel.attention"]   # tessel.attention is the function
    T = fake_torch.Tensor
    q = T((1, 2, 100, 64), fake_torch.float16)
    att._cuda_configs.clear()
    entries = len(mod_functions._jitted)
    for w in range(3 * att._CUDA_CONFIGS_MAX):
        with pytest.raises(tessel.GpuUnavailableError):
            tessel.attention(q, q, q, mask_mod=lambda b, h, q_idx, kv_idx: q_idx >= kv_idx)
    assert len(att._cuda_configs) <= att._CUDA_CONFIGS_MAX
    assert len(mod_functions._jitted) <= entries + 1   # one kernel, not one per lambda


def test_serving_checks_torch_inputs(fake_torch):
    T = fake_torch.Tensor
    q, k = T((10, 4, 64), fake_torch.float16), T((12, 2, 64), fake_torch.float16)
    cu = T((3,), fake_torch.int32)
    with pytest.raises(TypeError, match="cu_seqlens_q must be a CUDA int32 tensor on q's device"):
        tessel.attention_varlen(q, k, k, T((3,), fake_torch.int32, cuda=False), cu, 6, 7)
    with pytest.raises(TypeError, match="cu_seqlens_k must be int32, got f32"):
        tessel.attention_varlen(q, k, k, cu, T((3,), fake_torch.float32), 6, 7)
    with pytest.raises(TypeError, match="q is a torch tensor but k is a ndarray"):
        tessel.attention_varlen(q, np.zeros((12, 2, 64), np.float16), k, cu, cu, 6, 7)
    with pytest.raises(TypeError, match="k is on cpu"):
        tessel.attention_varlen(q, T((12, 2, 64), fake_torch.float16, cuda=False), k, cu, cu, 6, 7)
    cache = T((2, 32, 2, 64), fake_torch.float16)
    # (attention_varlen is differentiable since the thirty-fifth session: test_varlen_backward.)
    needs = T((2, 1, 4, 64), fake_torch.float16)
    needs.requires_grad = True
    with pytest.raises(NotImplementedError, match="q requires grad"):
        tessel.attention_with_kvcache(needs, cache, cache, T((2,), fake_torch.int32))
    with pytest.raises(ValueError, match="block_table has 3 rows for a batch of 2"):
        tessel.attention_with_kvcache(T((2, 1, 4, 64), fake_torch.float16), cache, cache,
                                      T((2,), fake_torch.int32),
                                      block_table=T((3, 4), fake_torch.int32))
