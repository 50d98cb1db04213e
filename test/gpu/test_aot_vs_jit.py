"""Ahead-of-time kernels against the JIT on the GPU: for the same specialisation the generated C
library (compiled here with gcc, loaded with ctypes, launched on torch's stream) and
tessel.attention give bit-identical outputs, because both go through the same cache key to the
same cubin. Run where there is a GPU (skipped elsewhere), with tessel importable.
"""
import ctypes
import math
import pathlib
import subprocess

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tessel  # noqa: E402
from tessel import aot  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
CUDA = pathlib.Path("/usr/local/cuda")
DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


@pytest.mark.parametrize("dtype,head_dim,causal,block", [("f16", 64, 1, 64), ("bf16", 128, 0, 64),
                                                        ("f16", 128, 1, 128)])
def test_aot_is_bit_identical_to_jit(tmp_path, dtype, head_dim, causal, block):
    major, minor = torch.cuda.get_device_capability()
    chip = "sm_90a" if major >= 9 else "sm_80"
    spec = aot.parse_spec(f"dtype={dtype},head_dim={head_dim},causal={causal},chip={chip},"
                          f"block_m={block},block_n=64")
    manifest = aot.compile_specs(ROOT / "examples" / "aot" / "attention_dsl.py", [spec], tmp_path,
                                 name="lib")
    lib = tmp_path / "libaot.so"
    subprocess.run(["gcc", "-std=c11", "-O2", "-shared", "-fPIC", f"-I{tmp_path}",
                    f"-I{CUDA / 'include'}", str(tmp_path / "lib.c"), "-o", str(lib),
                    f"-L{CUDA / 'lib64' / 'stubs'}", "-lcuda", "-lpthread"], check=True)
    fn = getattr(ctypes.CDLL(str(lib)), manifest["kernels"][0]["function"])
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p] * 6 + [ctypes.c_int32] * 5 + [ctypes.c_float]

    B, H, HKV, NQ, NK = 2, 4, 2, 333, 517
    t = DTYPES[dtype]
    q = torch.randn(B, H, NQ, head_dim, device="cuda", dtype=t)
    k = torch.randn(B, HKV, NK, head_dim, device="cuda", dtype=t)
    v = torch.randn(B, HKV, NK, head_dim, device="cuda", dtype=t)
    scale = 1.0 / math.sqrt(head_dim)
    o_aot = torch.full_like(q, float("nan"))
    lse_aot = torch.full((B, H, NQ), float("nan"), device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    rc = fn(stream, q.data_ptr(), k.data_ptr(), v.data_ptr(), o_aot.data_ptr(), lse_aot.data_ptr(),
            B, H, HKV, NQ, NK, scale)
    assert rc == 0, f"AOT launch returned CUresult {rc}"
    o_jit, lse_jit = tessel.attention(q, k, v, causal=bool(causal), scale=scale, enable_gqa=True,
                                      return_lse=True, block_m=block, block_n=64)
    torch.cuda.synchronize()
    assert not torch.isnan(o_aot).any()
    assert torch.equal(o_aot.view(torch.int16), o_jit.view(torch.int16))
    assert torch.equal(lse_aot.view(torch.int32), lse_jit.float().view(torch.int32))
