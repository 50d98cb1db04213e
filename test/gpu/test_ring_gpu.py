"""tessel.distributed.ring_attention on GPUs (issue 17).

Run on a machine with a GPU and torch (skipped elsewhere; the multi-GPU tests need two or more):
    TESSEL_CACHE_DIR=$(mktemp -d) python3 -m pytest -q -s test/gpu/test_ring_gpu.py
With $OUT set, the measurements (merge speed; with two GPUs, scaling and memory) are written
there as JSON as well as printed. TESSEL_RING_N sets the sequence length of the two-GPU speed
run (default 65536; the issue asks for up to 262144).

- One GPU: a process group of one rank (NCCL, or gloo where NCCL is missing) runs the same code
  path with no communication; its output and gradients are bit for bit tessel.attention's.
- The merge program (distributed.merge_partial) on CUDA tensors: key blocks merged = the whole
  attention, and its speed in GB/s.
- Two or more GPUs: torchrun (torch.distributed.run --standalone) starts ring_gpu_worker.py on
  two GPUs with NCCL: outputs and gradients against one-GPU attention, then speed against one
  GPU on the same total work, and peak memory per GPU.
"""
import json
import os
import pathlib
import socket
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import torch.distributed as dist  # noqa: E402

import tessel  # noqa: E402
from tessel.distributed import _merge, ring_attention  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_decode import time_back_to_back  # noqa: E402


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _record(name, data):
    print(f"{name}: {json.dumps(data)}")
    out = os.environ.get("OUT")
    if out:
        pathlib.Path(out, f"{name}.json").write_text(json.dumps(data, indent=1))


@pytest.fixture(scope="module")
def one_rank():
    """A process group of one rank on GPU 0 (the world, for this pytest process)."""
    torch.cuda.set_device(0)
    backend = "nccl" if dist.is_nccl_available() else "gloo"
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0,
                            world_size=1)
    yield backend
    dist.destroy_process_group()


def _inputs(B, H, Hkv, N, D, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(B, h, N, D, device="cuda", dtype=dtype, generator=g)
            for h in (H, Hkv, Hkv)]


DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("Hkv", [4, 2])
def test_world_one_is_tessel_attention(one_rank, dtype, D, causal, Hkv):
    q, k, v = _inputs(2, 4, Hkv, 1000, D, DTYPES[dtype])
    o, lse = ring_attention(q, k, v, causal=causal, enable_gqa=True, return_lse=True)
    o_ref, lse_ref = tessel.attention(q, k, v, causal=causal, enable_gqa=True, return_lse=True)
    assert torch.equal(o, o_ref)
    assert torch.equal(lse, lse_ref)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("causal", [False, True])
def test_world_one_backward_is_tessel_attention(one_rank, dtype, causal):
    inputs = _inputs(1, 4, 2, 300, 64, DTYPES[dtype], seed=1)
    do = torch.randn_like(inputs[0])
    a = [x.clone().requires_grad_() for x in inputs]
    b = [x.clone().requires_grad_() for x in inputs]
    ring_attention(*a, causal=causal, enable_gqa=True).backward(do)
    tessel.attention(*b, causal=causal, enable_gqa=True).backward(do)
    for name, x, y in zip("qkv", a, b):
        assert torch.equal(x.grad, y.grad), name


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("D", [64, 128])
def test_merge_program_on_the_gpu(dtype, D):
    q, k, v = _inputs(2, 4, 4, 777, D, DTYPES[dtype], seed=2)
    o_ref, lse_ref = tessel.attention(q, k, v, return_lse=True)
    o_acc = torch.zeros(q.shape, dtype=torch.float32, device="cuda")
    lse_acc = torch.full(q.shape[:3], float("-inf"), device="cuda")
    for a, b in ((0, 100), (100, 555), (555, 777)):
        o_i, lse_i = tessel.attention(q, k[:, :, a:b].contiguous(), v[:, :, a:b].contiguous(),
                                      return_lse=True)
        _merge(o_acc, lse_acc, o_i, lse_i, 0)
    tol = {"f32": 1e-5, "f16": 2e-3, "bf16": 1.6e-2}[dtype]
    assert (o_acc - o_ref.float()).abs().max().item() < tol
    assert (lse_acc - lse_ref).abs().max().item() < 1e-4


def test_merge_program_speed():
    """GB/s of one merge: reads the float32 accumulator, the fp16 part and both LSEs, writes
    the accumulator and its LSE."""
    B, H, N, D = 1, 32, 16384, 128
    o_acc = torch.randn(B, H, N, D, device="cuda")
    lse_acc = torch.randn(B, H, N, device="cuda")
    o_part = torch.randn(B, H, N, D, device="cuda", dtype=torch.float16)
    lse_part = torch.randn(B, H, N, device="cuda")
    ms = time_back_to_back(torch, lambda: _merge(o_acc, lse_acc, o_part, lse_part, 0), 20,
                           warmup=3, synchronize=False)
    moved = B * H * N * (D * (4 + 4 + 2) + 4 * 3)
    _record("ring_merge_speed", {"shape": [B, H, N, D], "ms": round(ms, 4),
                                 "GB_per_s": round(moved / ms / 1e6, 1),
                                 "device": torch.cuda.get_device_name()})


def _torchrun(world, mode, out, timeout):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc-per-node={world}", str(HERE / "ring_gpu_worker.py"), mode, str(out)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-8000:]
    return [json.loads(pathlib.Path(out, f"{mode}-rank{r}.json").read_text())
            for r in range(world)]


needs_two = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="fewer than 2 GPUs")


@needs_two
def test_nccl_ring_matches_one_gpu(tmp_path):
    results = _torchrun(2, "check", tmp_path, 600)
    bad = [f"rank {r}: {case}: {v['detail']}" for r, res in enumerate(results)
           for case, v in res.items() if not v["ok"]]
    assert not bad, "\n".join(bad)


@needs_two
def test_nccl_ring_speed_and_memory(tmp_path):
    world = min(torch.cuda.device_count(), 8)
    results = _torchrun(world, "speed", tmp_path, 600)
    _record(f"ring_speed_{world}gpu", results[0] | {"peak_memory_GiB_per_rank":
                                                    [r["peak_memory_GiB"] for r in results]})
