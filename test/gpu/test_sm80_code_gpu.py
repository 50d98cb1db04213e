"""The sm_80 (mma.sync) forward kernels tessel ships as the A100's defaults — d128's 128x64 with
a three-stage ring (attention.GPU_STAGES), d128 with a score_mod or mask_mod at 64x64
(attention.GPU_BLOCKS_MODS), d64 and d256 — against float32 torch attention on fresh random
inputs. On a device of compute capability 8.x only: an sm_80 cubin does not load on the H200
("no kernel image is available for execution on the device", 2026-12-05 — written in the
twenty-fifth session on the contrary assumption). Running the same kernels there would take
their PTX (the driver's JIT) or the mma path compiled for sm_90a (check_attention_mma.py).

Run on a machine with a GPU and torch (skipped elsewhere):
    TESSEL_CACHE_DIR=$(mktemp -d) PYTHONPATH=build/python python3 -m pytest -q test/gpu/test_sm80_code_gpu.py
"""
import importlib

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
if torch.cuda.get_device_capability()[0] != 8:
    pytest.skip("sm_80 cubins load on compute capability 8.x devices only",
                allow_module_level=True)

import tessel  # noqa: E402
import tessel.language as tl  # noqa: E402
attention_module = importlib.import_module("tessel.attention")   # the module, not the function

TOL = {torch.float16: 5e-3, torch.bfloat16: 2e-2}


@pytest.fixture(autouse=True)
def sm80():
    """tessel compiles for sm_80 on device 0 for the test (gpu.chip_of's cache)."""
    chips = tessel.gpu._chips
    before = chips.get(0)
    tessel.gpu.chip_of(0)
    chips[0] = "sm_80"
    attention_module._cuda_configs.clear()
    yield
    chips[0] = before
    if before is None:
        del chips[0]
    attention_module._cuda_configs.clear()


def softcap(score, b, h, q_idx, kv_idx):
    return 30.0 * tl.tanh(score / 30.0)


def window(b, h, q_idx, kv_idx):
    return q_idx - kv_idx < 300


def reference(q, k, v, causal, mod):
    q, k, v = q.float(), k.float(), v.float()
    k = k.repeat_interleave(q.shape[1] // k.shape[1], 1)
    v = v.repeat_interleave(q.shape[1] // v.shape[1], 1)
    s = torch.einsum("bhqd,bhkd->bhqk", q, k) / q.shape[-1] ** 0.5
    if mod == "softcap":
        s = 30.0 * torch.tanh(s / 30.0)
    i = torch.arange(s.shape[-2], device=q.device)[:, None]
    j = torch.arange(s.shape[-1], device=q.device)[None, :]
    keep = torch.ones(s.shape[-2:], dtype=torch.bool, device=q.device)
    if causal:
        keep = keep & (i >= j)
    if mod == "window":
        keep = keep & (i - j < 300)
    return torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1).nan_to_num(0.0) @ v


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("mod", [None, "softcap", "window"])
@pytest.mark.parametrize("B,H,Hkv,Nq,Nk", [(2, 8, 8, 1024, 1024), (1, 4, 2, 1000, 1777)])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_sm80_forward(dtype, causal, mod, B, H, Hkv, Nq, Nk, D):
    gen = torch.Generator(device="cuda").manual_seed(D + Nq + 3 * Nk)
    q = torch.randn(B, H, Nq, D, device="cuda", dtype=dtype, generator=gen)
    k, v = (torch.randn(B, Hkv, Nk, D, device="cuda", dtype=dtype, generator=gen)
            for _ in range(2))
    mods = {"softcap": dict(score_mod=softcap), "window": dict(mask_mod=window)}.get(mod, {})
    kernel = tessel.compile_attention(q, k, v, causal=causal, enable_gqa=H != Hkv, **mods)
    spec = {item[0]: item[-1] for item in kernel.specialization}
    blocks = (spec["BLOCK_M"], spec["BLOCK_N"])
    assert blocks == attention_module.gpu_blocks(D, "f16", Nq, Nk, "sm_80",
                                                 mods=mod is not None)
    o = tessel.attention(q, k, v, causal=causal, enable_gqa=H != Hkv, **mods)
    ref = reference(q, k, v, causal, mod)
    err = (o.float() - ref).abs().max().item()
    assert err <= TOL[dtype] * max(1.0, ref.abs().max().item()), (blocks, err)
