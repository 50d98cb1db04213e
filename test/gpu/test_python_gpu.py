"""The DSL on the GPU: kernel[grid](...) and tessel.attention on CUDA torch tensors.

Run on a machine with a GPU and torch (skipped elsewhere):
    TESSEL_CACHE_DIR=$(mktemp -d) python3 -m pytest -q test/gpu/test_python_gpu.py
with tessel importable (PYTHONPATH=build/python, or the GPU bundle's python/). Every result is
compared with a float32 torch reference on fresh random inputs; outputs are poisoned with NaN
before the launches that write them. TESSEL_GPU_RESULTS=FILE.json collects the measured errors
and the memory numbers.
"""
import importlib
import json
import math
import os
import sys

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tessel  # noqa: E402
import tessel.cache  # noqa: E402
from tessel import language as tl  # noqa: E402
from tessel.attention import attention_kernel, gpu_blocks  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from launch_kernels import scale_shift  # noqa: E402

RESULTS = {"attention": [], "memory": [], "kernels": []}
TOL = {torch.float16: 5e-3, torch.bfloat16: 2e-2, torch.float32: 1e-4}


@pytest.fixture(scope="module", autouse=True)
def write_results():
    yield
    path = os.environ.get("TESSEL_GPU_RESULTS")
    if path:
        with open(path, "w") as f:
            json.dump(RESULTS, f, indent=1)


def reference(q, k, v, causal, scale):
    """float32 attention (o, natural-log lse) on the GPU; k/v heads repeated for GQA."""
    q, k, v = q.float(), k.float(), v.float()
    rep = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    s = torch.einsum("bhqd,bhkd->bhqk", q, k) * scale
    if causal:
        nq, nk = s.shape[-2:]
        keep = torch.ones(nq, nk, dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.softmax(s, dim=-1)
    return p @ v, lse


def rand(shape, dtype, gen):
    return torch.randn(shape, generator=gen, device="cuda", dtype=torch.float32).to(dtype)


def test_chip_and_device():
    count, reason = tessel.gpu.device_count()
    assert count == torch.cuda.device_count(), reason
    major, _ = torch.cuda.get_device_capability(0)
    assert tessel.gpu.chip_of(0) == ("sm_90a" if major >= 9 else "sm_80")


@pytest.mark.parametrize("n", [1, 1000, 4099])
def test_trivial_kernel_on_tensors(n):
    gen = torch.Generator(device="cuda").manual_seed(n)
    x = torch.randn(n, generator=gen, device="cuda")
    y = torch.full_like(x, float("nan"))
    block = 256
    scale_shift[(-(-n // block),)](x, y, n, 2.5, -1.0, BLOCK=block)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, x * 2.5 - 1.0)
    # A callable grid sees every argument by name.
    y.fill_(float("nan"))
    scale_shift[lambda m: (-(-m["n"] // m["BLOCK"]),)](x, y, n, 0.5, 3.0, BLOCK=block)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, x * 0.5 + 3.0)


def test_device_pointer_and_stream():
    n = 3000
    x = torch.randn(n, device="cuda")
    y = torch.full_like(x, float("nan"))
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x2 = x * 3.0                      # on stream s: the launch must come after it
        scale_shift[(-(-n // 128),)](tessel.DevicePointer(x2.data_ptr(), "f32"),
                                     tessel.DevicePointer(y.data_ptr(), torch.float32),
                                     n, 1.0, 0.0, BLOCK=128)
    s.synchronize()
    torch.testing.assert_close(y, x * 3.0)


def test_host_memory_is_an_error_not_a_fault():
    x = torch.randn(64, device="cuda")
    with pytest.raises(TypeError, match="torch tensor on cpu"):
        scale_shift[(1,)](x.cpu(), x, 64, 1.0, 0.0, BLOCK=64)
    import ctypes
    host = ctypes.create_string_buffer(256)
    with pytest.raises(ValueError, match="not CUDA device memory"):
        scale_shift[(1,)](x, tessel.DevicePointer(ctypes.addressof(host), "f32"), 64, 1.0, 0.0,
                          BLOCK=64)
    # The context still works.
    y = torch.zeros_like(x)
    scale_shift[(1,)](x, y, 64, 1.0, 0.0, BLOCK=64)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, x)


@tessel.jit
def bad_kernel(x, n, BLOCK: tl.constexpr):
    xd = tl.make_desc(x, shape=(n,), strides=(1,))
    t = tl.load(xd, (0,), shape=(BLOCK,))
    tl.store(xd, (0,), t + undefined_name)  # noqa: F821


def test_compilation_error_is_located():
    x = torch.zeros(16, device="cuda")
    with pytest.raises(tessel.CompilationError) as e:
        bad_kernel[(1,)](x, 16, BLOCK=16)
    assert e.value.filename == __file__ and e.value.lineno is not None


CASES = [  # B, H, Hkv, Nq, Nk
    (2, 2, 2, 1, 1),
    (1, 4, 2, 100, 77),        # GQA 2:1, lengths not multiples of the block
    (2, 2, 2, 257, 300),
    (1, 8, 1, 1000, 1000),     # GQA 8:1
]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("D", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", CASES, ids=[f"{c[3]}x{c[4]}h{c[1]}:{c[2]}" for c in CASES])
def test_attention_matches_float32(dtype, D, causal, case):
    B, H, Hkv, Nq, Nk = case
    gen = torch.Generator(device="cuda").manual_seed(hash((D, causal, case)) & 0xFFFF)
    q = rand((B, H, Nq, D), dtype, gen)
    k = rand((B, Hkv, Nk, D), dtype, gen)
    v = rand((B, Hkv, Nk, D), dtype, gen)
    scale = 1.0 / math.sqrt(D)
    ref_o, ref_lse = reference(q, k, v, causal, scale)

    # tessel.attention itself.
    o, lse = tessel.attention(q, k, v, causal=causal, enable_gqa=Hkv != H, return_lse=True)
    assert o.dtype == dtype and o.shape == q.shape and lse.shape == (B, H, Nq)
    # The kernel directly, outputs poisoned, at tessel.attention's blocks (no mask_mod here:
    # unmasked unless causal).
    bm, bn = gpu_blocks(D, tessel.gpu.torch_dtype_name(q), Nq, Nk,
                        tessel.gpu.chip_of(q.get_device()), unmasked=not causal)
    o2 = torch.full_like(q, float("nan"))
    lse2 = torch.full((B, H, Nq), float("nan"), device="cuda")
    kernel = attention_kernel.warmup(q, k, v, o2, lse2, Nq, Nk, H, Hkv, scale, D=D, BLOCK_M=bm,
                                     BLOCK_N=bn, CAUSAL=causal, SCORE_MOD=None, MASK_MOD=None)
    attention_kernel[(-(-Nq // bm), B * H)](q, k, v, o2, lse2, Nq, Nk, H, Hkv, scale, D=D,
                                            BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal,
                                            SCORE_MOD=None, MASK_MOD=None)
    torch.cuda.synchronize()
    binary = kernel.binary(tessel.cache.GpuOptions(chip=tessel.gpu.chip_of(0)))
    row = {"dtype": str(dtype), "D": D, "causal": causal, "case": case, "block": [bm, bn],
           "registers": binary.manifest.get("registers"),
           "dynamic_smem": binary.dynamic_shared_bytes, "threads": binary.block[0]}
    for tag, out, out_lse in (("attention", o, lse), ("poisoned", o2, lse2)):
        assert not torch.isnan(out).any() and not torch.isnan(out_lse).any(), tag
        err = (out.float() - ref_o).abs().max().item()
        rel = err / max(ref_o.abs().max().item(), 1e-30)
        lse_err = (out_lse - ref_lse).abs().max().item()
        row[tag] = {"rel_max": rel, "lse_abs": lse_err}
        assert rel < TOL[dtype], (tag, rel)
        assert lse_err < 1e-2, (tag, lse_err)
    torch.testing.assert_close(o, o2, rtol=0, atol=0)   # same kernel, same inputs
    RESULTS["attention"].append(row)


@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("blocks", [(64, 64), (128, 64), (64, 128), (64, 32), (128, 128)],
                         ids=lambda b: f"{b[0]}x{b[1]}")
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_asked_for_blocks_match_float32(D, blocks, causal):
    """tessel.attention with block_m / block_n asked for, over whole key blocks (one key loop:
    EVEN_N) and ragged ones, fresh inputs against float32. d64 at 64x64 and 128x64 over whole
    key blocks read P in place of Q after the first block (ptxas 13.0; the forty-third session's
    CUDA fuzzer found it: tilegpu's plan now reads such a Q by descriptor)."""
    gen = torch.Generator(device="cuda").manual_seed(D + blocks[0] + 3 * blocks[1] + causal)
    for Nq, Nk in ((300, 512), (256, 250)):
        q = rand((1, 4, Nq, D), torch.float16, gen)
        k, v = (rand((1, 2, Nk, D), torch.float16, gen) for _ in range(2))
        o, lse = tessel.attention(q, k, v, causal=causal, enable_gqa=True, block_m=blocks[0],
                                  block_n=blocks[1], return_lse=True)
        ref_o, ref_lse = reference(q, k, v, causal, D ** -0.5)
        rel = ((o.float() - ref_o).abs().max() / ref_o.abs().max()).item()
        assert rel < TOL[torch.float16], (Nq, Nk, rel)
        assert (lse - ref_lse).abs().max().item() < 1e-2, (Nq, Nk)


AFFINE_SLOPES = torch.tensor([2.0 ** -8, 2.0 ** -3, 0.5, 1.0])   # per head, shallow to steep


def alibi_mod(score, b, h, q_idx, kv_idx):
    return score + AFFINE_SLOPES_CUDA[h] * (kv_idx - q_idx)


def distance_mod(score, b, h, q_idx, kv_idx):
    return score - 0.25 * (q_idx - kv_idx) - 0.5 * (q_idx + 2 * kv_idx) / 1000.0


AFFINE_SLOPES_CUDA = AFFINE_SLOPES.cuda()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("D", [64, 128, 256])   # d256 with a mod: 128x32 (GPU_BLOCKS_MODS)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("mod", ["alibi", "distance"])
@pytest.mark.parametrize("N", [1000, 3000])
def test_affine_biases_match_float32(dtype, D, causal, mod, N):
    """Biases affine in the indices (tile-separate-bias computes them per row and per column
    and takes the row part around the softmax): output and LSE against float32, with slopes up
    to 1 (the row part reaches thousands) and lengths that are not a multiple of the block."""
    B, H = 1, 4
    gen = torch.Generator(device="cuda").manual_seed(N + D + causal * 7 + len(mod))
    q, k, v = (rand((B, H, N, D), dtype, gen) for _ in range(3))
    scale = 1.0 / math.sqrt(D)
    qi = torch.arange(N, device="cuda")[:, None].float()
    ki = torch.arange(N, device="cuda")[None, :].float()
    if mod == "alibi":
        bias = AFFINE_SLOPES_CUDA[:, None, None] * (ki - qi)
    else:
        bias = -0.25 * (qi - ki) - 0.5 * (qi + 2 * ki) / 1000.0
    s = torch.einsum("bhqd,bhkd->bhqk", q.float(), k.float()) * scale + bias
    if causal:
        s = s.masked_fill(qi < ki, float("-inf"))
    ref_o, ref_lse = torch.softmax(s, dim=-1) @ v.float(), torch.logsumexp(s, dim=-1)
    o, lse = tessel.attention(q, k, v, causal=causal, return_lse=True,
                              score_mod=alibi_mod if mod == "alibi" else distance_mod)
    rel = (o.float() - ref_o).abs().max().item() / ref_o.abs().max().item()
    assert rel < TOL[dtype], rel
    # The LSE's row part is added back after the loop: thousands at slope 1, kept to f32.
    lse_err = ((lse - ref_lse).abs() / ref_lse.abs().clamp(min=1.0)).max().item()
    assert lse_err < 1e-4, lse_err


def band_mask(b, h, q_idx, kv_idx):
    return (q_idx - kv_idx < 300) & (kv_idx - q_idx < 300)


@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("Nq,Nk", [(1000, 1000), (3000, 1100), (1100, 3000)])
def test_affine_bias_with_a_band_matches_float32(D, Nq, Nk):
    """The separated affine bias (tile-separate-bias) in masked loops of several blocks: a band
    of ±300 keys makes the split's masked copies before and after the unmasked one run two or
    three key blocks each (the fused-loop failure of the twenty-seventh session sat in such a
    copy run over many blocks), with queries and keys of different lengths, some rows seeing no
    key."""
    B, H = 1, 4
    gen = torch.Generator(device="cuda").manual_seed(Nq + Nk + D)
    q = rand((B, H, Nq, D), torch.float16, gen)
    k, v = (rand((B, H, Nk, D), torch.float16, gen) for _ in range(2))
    scale = 1.0 / math.sqrt(D)
    qi = torch.arange(Nq, device="cuda")[:, None].float()
    ki = torch.arange(Nk, device="cuda")[None, :].float()
    bias = -0.25 * (qi - ki) - 0.5 * (qi + 2 * ki) / 1000.0
    s = torch.einsum("bhqd,bhkd->bhqk", q.float(), k.float()) * scale + bias
    s = s.masked_fill(((qi - ki) >= 300) | ((ki - qi) >= 300), float("-inf"))
    # With 3000 queries and 1100 keys the rows from 1399 on see no key: O = 0, lse = -inf.
    seen = torch.isfinite(s).any(dim=-1)
    ref_o = torch.softmax(s, dim=-1).nan_to_num(0.0) @ v.float()
    ref_lse = torch.logsumexp(s, dim=-1)
    o, lse = tessel.attention(q, k, v, return_lse=True, score_mod=distance_mod,
                              mask_mod=band_mask)
    rel = (o.float() - ref_o).abs().max().item() / ref_o.abs().max().item()
    assert rel < TOL[torch.float16], rel
    lse_err = ((lse - ref_lse).abs() / ref_lse.abs().clamp(min=1.0))[seen].max().item()
    assert lse_err < 1e-4, lse_err
    assert torch.equal(lse[~seen], ref_lse[~seen])    # -inf where no key is seen


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("D", [16, 40, 80, 96, 160, 192])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_padded_head_dims_match_float32(dtype, D, causal):
    """Head dims the fast paths do not take run padded to the next of 64/128/256: the output
    has the caller's D columns, contiguous, and matches float32; the LSE too; strided (BSHD)
    inputs as well."""
    B, H, Hkv, Nq, Nk = 2, 4, 2, 257, 300
    gen = torch.Generator(device="cuda").manual_seed(D * 2 + causal)
    q = rand((B, Nq, H, D), dtype, gen).transpose(1, 2)          # a BSHD view
    k = rand((B, Hkv, Nk, D), dtype, gen)
    v = rand((B, Hkv, Nk, D), dtype, gen)
    ref_o, ref_lse = reference(q, k, v, causal, 1.0 / math.sqrt(D))
    o, lse = tessel.attention(q, k, v, causal=causal, enable_gqa=True, return_lse=True)
    # Padded: o cut and contiguous. A head dim run natively on strided views
    # (attention.NATIVE_STRIDED) returns o in q's [B, N, H, D] layout, as the fast paths do.
    assert o.shape == q.shape and o.dtype == dtype
    assert o.is_contiguous() or o.transpose(1, 2).is_contiguous()
    rel = (o.float() - ref_o).abs().max().item() / ref_o.abs().max().item()
    assert rel < TOL[dtype], rel
    assert (lse - ref_lse).abs().max().item() < 1e-2


def check_softcapped(q, k, v, causal, cap, dtype):
    """tessel.attention(q, k, v) with a softcap `cap` (or None), GQA where k has fewer heads,
    top-left causal: o and the LSE against float32 torch."""
    H, Nq, D = q.shape[1:]
    Hkv, Nk = k.shape[1:3]
    rep = H // Hkv
    s = torch.einsum("bhqd,bhkd->bhqk", q.float(), k.float().repeat_interleave(rep, dim=1))
    s = s / math.sqrt(D)
    if cap:
        s = cap * torch.tanh(s / cap)
    if causal:
        s = s.masked_fill(~torch.ones(Nq, Nk, dtype=torch.bool, device="cuda").tril(),
                          float("-inf"))
    ref_lse = torch.logsumexp(s, dim=-1)
    ref_o = torch.softmax(s, dim=-1) @ v.float().repeat_interleave(rep, dim=1)
    o, lse = tessel.attention(q, k, v, causal=causal, enable_gqa=rep > 1, return_lse=True,
                              softcap=cap)
    assert o.shape == q.shape and o.dtype == dtype
    rel = (o.float() - ref_o).abs().max().item() / ref_o.abs().max().item()
    assert rel < TOL[dtype], rel
    assert (lse - ref_lse).abs().max().item() < 1e-2


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", [(2, 4, 2, 257, 300), (1, 2, 2, 1024, 1024), (1, 2, 1, 64, 4000)],
                         ids=["ragged-gqa", "whole", "few-queries"])
@pytest.mark.parametrize("mod", [None, "softcap"])
def test_native_head_dim_192(monkeypatch, dtype, causal, shape, mod):
    """Head dim 192 on sm_90a as it is (attention.NATIVE_HEAD_DIMS: three 64-column wgmma
    slabs, Q copied a slab at a time), not padded to 256: against float32, ragged and whole
    key blocks, GQA, causal (the persistent kernel), a softcap; the padded path is not taken."""
    attn = importlib.import_module("tessel.attention")
    if tessel.gpu.chip_of(torch.cuda.current_device()) != "sm_90a":
        pytest.skip("head dim 192 runs natively on sm_90a only")
    monkeypatch.setattr(attn, "NATIVE_HEAD_DIMS", {"sm_90a": (192,)})
    monkeypatch.setattr(attn, "_attention_padded",
                        lambda *a, **kw: pytest.fail("took the padded path"))
    B, H, Hkv, Nq, Nk = shape
    D, cap = 192, 20.0 if mod else None
    gen = torch.Generator(device="cuda").manual_seed(Nq + Nk + causal + (mod is not None))
    q = rand((B, H, Nq, D), dtype, gen)
    k = rand((B, Hkv, Nk, D), dtype, gen)
    v = rand((B, Hkv, Nk, D), dtype, gen)
    check_softcapped(q, k, v, causal, cap, dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", ["ragged-gqa-view", "whole-softcap", "few-queries"])
@pytest.mark.parametrize("D", [96, 80, 40, 160])
def test_block_head_dim(monkeypatch, dtype, causal, case, D):
    """attention.BLOCK_HEAD_DIM_CHIPS (empty until this passes): head dims the fast paths pad
    run their kernels with blocks of the padded head dim over q, k and v as they are (DB:
    columns past D read as 0 by TMA's zero fill or the copies' bounds, o stored D wide), not
    copied padded: against float32, ragged and whole key blocks (persistent, TMA), GQA, a BSHD
    view of q, a softcap; the padded path is not taken."""
    attn = importlib.import_module("tessel.attention")
    chip = tessel.gpu.chip_of(torch.cuda.current_device())
    monkeypatch.setattr(attn, "BLOCK_HEAD_DIM_CHIPS", (chip,))
    monkeypatch.setattr(attn, "_attention_padded",
                        lambda *a, **kw: pytest.fail("took the padded path"))
    B, H, Hkv, Nq, Nk = {"ragged-gqa-view": (2, 4, 2, 257, 300),
                         "whole-softcap": (1, 2, 2, 1024, 1024),
                         "few-queries": (1, 2, 1, 64, 4000)}[case]
    cap = 20.0 if case == "whole-softcap" else None
    gen = torch.Generator(device="cuda").manual_seed(D + Nq + causal)
    q = rand((B, Nq, H, D), dtype, gen).transpose(1, 2) if case.endswith("view") else \
        rand((B, H, Nq, D), dtype, gen)
    k = rand((B, Hkv, Nk, D), dtype, gen)
    v = rand((B, Hkv, Nk, D), dtype, gen)
    check_softcapped(q, k, v, causal, cap, dtype)


@pytest.mark.parametrize("route", ["padded", "dv", "dv_programs"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("E,Ev", [(192, 128), (64, 128), (128, 64)])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_value_head_dim_of_its_own(monkeypatch, dtype, E, Ev, causal, route):
    """v with its own head dim (SDPA's Ev; DeepSeek's MLA prefill: 192/128) on CUDA: the
    output against float32, the gradients against float64 within twice torch's own error.
    route dv (forty-ninth session, attention.VALUE_HEAD_DIM_GRAD): a v narrower than q through
    the DV kernel's forward and the backward on padded v, o and dO, not the padded call;
    dv_programs: the backward's programs at v's width as well."""
    from grad_check import assert_within_twice_torch
    attn = importlib.import_module("tessel.attention")
    monkeypatch.setattr(attn, "VALUE_HEAD_DIM_GRAD", route != "padded")
    # dv_programs: the backward's own programs at v's width too (backward.
    # VALUE_HEAD_DIM_BACKWARD_CHIPS), not on v, o and dO padded.
    monkeypatch.setattr(importlib.import_module("tessel.backward"),
                        "VALUE_HEAD_DIM_BACKWARD_CHIPS",
                        ("sm_90a",) if route == "dv_programs" else ())
    if route != "padded":
        if Ev > E or tessel.gpu.chip_of(torch.cuda.current_device()) != "sm_90a":
            pytest.skip("the DV route with gradients: v narrower than q, on sm_90a")
        monkeypatch.setattr(attn, "call_with_value_head_dim",
                            lambda *a, **kw: pytest.fail("padded instead of the DV route"))
    B, H, Hkv, Nq, Nk = 2, 4, 2, 300, 333
    gen = torch.Generator(device="cuda").manual_seed(E + Ev + causal)
    base = [rand((B, H, Nq, E), dtype, gen), rand((B, Hkv, Nk, E), dtype, gen),
            rand((B, Hkv, Nk, Ev), dtype, gen)]
    leaves = [x.clone().requires_grad_() for x in base]
    o, lse = tessel.attention(*leaves, causal=causal, enable_gqa=True, return_lse=True)
    assert o.shape == (B, H, Nq, Ev) and o.dtype == dtype

    def torch_attention(as_dtype):
        q, k, v = (x.to(as_dtype).requires_grad_() for x in base)
        s = q @ k.repeat_interleave(H // Hkv, dim=1).transpose(-1, -2) / math.sqrt(E)
        if causal:
            s = s.masked_fill(~torch.ones(Nq, Nk, dtype=torch.bool, device="cuda").tril(),
                              float("-inf"))
        return (q, k, v), torch.softmax(s, dim=-1) @ v.repeat_interleave(H // Hkv, dim=1), \
            torch.logsumexp(s, dim=-1)

    _, ref_o, ref_lse = torch_attention(torch.float32)
    rel = (o.float() - ref_o.detach()).abs().max().item() / ref_o.abs().max().item()
    assert rel < TOL[dtype], rel
    assert (lse - ref_lse.detach()).abs().max().item() < 1e-2
    do = rand((B, H, Nq, Ev), dtype, gen)
    o.backward(do)
    want_leaves, want_o, _ = torch_attention(torch.float64)
    want_o.backward(do.double())
    low_leaves, low_o, _ = torch_attention(dtype)
    low_o.backward(do)
    assert_within_twice_torch([x.grad for x in leaves], [x.grad for x in want_leaves],
                              [x.grad for x in low_leaves])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("E,Ev", [(192, 128), (128, 64), (64, 128), (256, 128), (128, 256)])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("n", [300, 2048], ids=["ragged", "whole"])
def test_value_head_dim_kernel(monkeypatch, dtype, E, Ev, causal, n):
    """attention.VALUE_HEAD_DIM_KERNEL (on since this passed): v of its own head dim through
    the kernels' DV on sm_90a (P·V and o at v's width, the blocks of the wider head dim,
    persistent where those are), not padded; against float32, GQA, ragged and whole blocks."""
    attn = importlib.import_module("tessel.attention")
    if tessel.gpu.chip_of(torch.cuda.current_device()) != "sm_90a":
        pytest.skip("the DV kernels run on sm_90a")
    monkeypatch.setattr(attn, "VALUE_HEAD_DIM_KERNEL", True)
    monkeypatch.setattr(attn, "NATIVE_HEAD_DIMS", {"sm_90a": (192,)})
    monkeypatch.setattr(attn, "call_with_value_head_dim",
                        lambda *a, **kw: pytest.fail("padded instead of the DV kernel"))
    B, H, Hkv = 2, 4, 2
    gen = torch.Generator(device="cuda").manual_seed(E * 3 + Ev + causal + n)
    q = rand((B, H, n, E), dtype, gen)
    k = rand((B, Hkv, n, E), dtype, gen)
    v = rand((B, Hkv, n, Ev), dtype, gen)
    s = torch.einsum("bhqd,bhkd->bhqk", q.float(), k.float().repeat_interleave(2, dim=1))
    s = s / math.sqrt(E)
    if causal:
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool, device="cuda").tril(),
                          float("-inf"))
    ref_o = torch.softmax(s, dim=-1) @ v.float().repeat_interleave(2, dim=1)
    o, lse = tessel.attention(q, k, v, causal=causal, enable_gqa=True, return_lse=True)
    assert o.shape == (B, H, n, Ev) and o.dtype == dtype
    rel = (o.float() - ref_o).abs().max().item() / ref_o.abs().max().item()
    assert rel < TOL[dtype], rel
    assert (lse - torch.logsumexp(s, dim=-1)).abs().max().item() < 1e-2


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("E,Ev", [(192, 192), (192, 128), (128, 64)])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_native_strided_views(monkeypatch, dtype, E, Ev, causal):
    """attention.NATIVE_STRIDED (on since this passed): d192 native and the DV kernel on
    [B, N, H, D] views read in place (FlashAttention's layout), not padded: against float32,
    GQA, ragged lengths; o in q's layout, as on the other fast paths."""
    attn = importlib.import_module("tessel.attention")
    if tessel.gpu.chip_of(torch.cuda.current_device()) != "sm_90a":
        pytest.skip("d192 native and the DV kernels run on sm_90a")
    monkeypatch.setattr(attn, "NATIVE_STRIDED", True)
    monkeypatch.setattr(attn, "_attention_padded", lambda *a, **kw: pytest.fail("padded"))
    monkeypatch.setattr(attn, "call_with_value_head_dim",
                        lambda *a, **kw: pytest.fail("padded instead of the DV kernel"))
    B, H, Hkv, Nq, Nk = 2, 4, 2, 257, 300
    gen = torch.Generator(device="cuda").manual_seed(E + Ev + causal)
    q = rand((B, Nq, H, E), dtype, gen).transpose(1, 2)
    k = rand((B, Nk, Hkv, E), dtype, gen).transpose(1, 2)
    v = rand((B, Nk, Hkv, Ev), dtype, gen).transpose(1, 2)
    ref_o, ref_lse = reference(q, k, v, causal, 1.0 / math.sqrt(E))
    o, lse = tessel.attention(q, k, v, causal=causal, enable_gqa=True, return_lse=True)
    assert o.shape == (B, H, Nq, Ev) and o.transpose(1, 2).is_contiguous()
    rel = (o.float() - ref_o).abs().max().item() / ref_o.abs().max().item()
    assert rel < TOL[dtype], rel
    assert (lse - ref_lse).abs().max().item() < 1e-2


@pytest.mark.parametrize("blocks", [(64, 32), (64, 64), (128, 32), (128, 64)],
                         ids=lambda b: f"{b[0]}x{b[1]}")
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_head_dim_256_blocks(blocks, causal):
    """Head dim 256 at the blocks the fast paths take: Q stays in shared memory (64 registers a
    thread would not fit beside the accumulator); with 128 rows two warpgroups each read their
    64 rows of it."""
    B, H, Nq, Nk, D = 1, 3, 300, 333, 256
    gen = torch.Generator(device="cuda").manual_seed(blocks[0] + blocks[1] + causal)
    q, k, v = (rand((B, H, n, D), torch.bfloat16, gen) for n in (Nq, Nk, Nk))
    ref_o, ref_lse = reference(q, k, v, causal, 1.0 / math.sqrt(D))
    o, lse = tessel.attention(q, k, v, causal=causal, return_lse=True, block_m=blocks[0],
                              block_n=blocks[1])
    rel = (o.float() - ref_o).abs().max().item() / ref_o.abs().max().item()
    assert rel < TOL[torch.bfloat16], rel
    assert (lse - ref_lse).abs().max().item() < 1e-2


def test_attention_fast_path_is_used():
    """fp16 d128 and d64 compile to the chip's fast path: on sm_90a wgmma (one warpgroup of 4 warps
    per 64 query rows), on sm_80 mma.sync (one warp per 16 query rows, or per 32 with 128-row
    blocks — FA2's 4 warps x 32 rows). The PTX says so, and the block size."""
    chip = tessel.gpu.chip_of(0)
    for D in (128, 64):
        q = torch.randn(1, 1, 64, D, device="cuda", dtype=torch.float16)
        kernel = tessel.compile_attention(q, q, q, causal=True)
        bm, _ = gpu_blocks(D, "f16", 64, 64, chip)
        binary = kernel.binary(tessel.cache.GpuOptions(chip=chip))
        if chip == "sm_90a":
            assert binary.block[0] == 128 * bm // 64
            assert "wgmma.mma_async.sync.aligned.m64n" in binary.ptx
            assert "mma.sync.aligned" not in binary.ptx
        else:
            assert binary.block[0] in (32 * bm // 16, 32 * bm // 32)
            assert "mma.sync.aligned.m16n8k16" in binary.ptx


@pytest.mark.parametrize("D,N", [(128, 4096), (64, 8192)])
def test_attention_extra_memory_is_the_lse(D, N):
    B, H = 2, 8
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    tessel.attention(q, k, v, causal=True)          # compile and load outside the measurement
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    o, lse = tessel.attention(q, k, v, causal=True, return_lse=True)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    extra = peak - before - o.numel() * o.element_size()
    lse_bytes = lse.numel() * 4
    RESULTS["memory"].append({"B": B, "H": H, "N": N, "D": D, "inputs_bytes": 3 * q.numel() * 2,
                              "output_bytes": o.numel() * 2, "lse_bytes": lse_bytes,
                              "extra_bytes": extra})
    assert extra <= lse_bytes + 1024, (extra, lse_bytes)


# Layouts read in place (layouts.row_layout): FlashAttention's [B, N, H, D] seen as
# [B, H, N, D], k and v of a packed [B, N, 2, Hkv, D] tensor, q of a packed qkv; one that is
# copied (a transposed head dim). Sizes not multiples of the blocks, GQA.
LAYOUTS = ["bshd", "packed_kv", "packed_qkv", "q_only", "copied"]


def _inputs(layout, B, H, Hkv, N, D, dtype, gen):
    if layout == "bshd":
        return tuple(rand((B, N, h, D), dtype, gen).transpose(1, 2) for h in (H, Hkv, Hkv))
    if layout == "packed_kv":
        kv = rand((B, N, 2, Hkv, D), dtype, gen)
        return (rand((B, N, H, D), dtype, gen).transpose(1, 2), kv[:, :, 0].transpose(1, 2),
                kv[:, :, 1].transpose(1, 2))
    if layout == "packed_qkv":                  # no GQA: one H for q, k and v
        qkv = rand((B, N, 3, H, D), dtype, gen)
        return tuple(qkv[:, :, i].transpose(1, 2) for i in range(3))
    if layout == "q_only":
        return (rand((B, N, H, D), dtype, gen).transpose(1, 2), rand((B, Hkv, N, D), dtype, gen),
                rand((B, Hkv, N, D), dtype, gen))
    # The head dim not contiguous: copied first.
    return tuple(rand((B, h, D, N), dtype, gen).transpose(2, 3) for h in (H, Hkv, Hkv))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_strided_layouts_match_float32(dtype, D, causal, layout):
    B, H, N = 2, 4, 300
    Hkv = H if layout == "packed_qkv" else 2
    gen = torch.Generator(device="cuda").manual_seed(D + 7 * causal + 31 * LAYOUTS.index(layout))
    q, k, v = _inputs(layout, B, H, Hkv, N, D, dtype, gen)
    o, lse = tessel.attention(q, k, v, causal=causal, enable_gqa=H != Hkv, return_lse=True)
    want, want_lse = reference(q, k, v, causal, 1 / math.sqrt(D))
    assert o.shape == (B, H, N, D) and o.dtype == dtype
    if layout in ("copied",) or q.is_contiguous():
        assert o.is_contiguous()
    else:   # SDPA's flash backend's output for such q: a [B, N, H, D] buffer
        assert o.transpose(1, 2).is_contiguous()
    err = (o.float() - want).abs().max().item()
    RESULTS["attention"].append({"case": f"layout {layout} d{D} causal={causal}", "err": err})
    assert err < TOL[dtype] * max(1.0, want.abs().max().item()), err
    assert (lse - want_lse).abs().max().item() < 1e-2


@pytest.mark.parametrize("D,N", [(128, 4096), (64, 8192)])
def test_bshd_inputs_are_not_copied(D, N):
    B, H = 2, 8
    q, k, v = (torch.randn(B, N, H, D, device="cuda", dtype=torch.float16).transpose(1, 2)
               for _ in range(3))
    tessel.attention(q, k, v)                       # compile and load outside the measurement
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    o, lse = tessel.attention(q, k, v, return_lse=True)
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - before - o.numel() * o.element_size()
    assert extra <= lse.numel() * 4 + 1024, extra   # a copy of q alone would be 2·B·H·N·D bytes
    want, _ = reference(q, k, v, False, 1 / math.sqrt(D))
    err = (o.float() - want).abs().max().item()
    assert err < TOL[torch.float16] * max(1.0, want.abs().max().item()), err


@pytest.mark.parametrize("strided", [False, True], ids=["copied", "in-place"])
def test_strided_inputs_get_gradients(strided, monkeypatch):
    # in-place: the fast backward reads the views (backward.STRIDED_BACKWARD, the default);
    # copied: it copies them first.
    import tessel.backward
    monkeypatch.setattr(tessel.backward, "STRIDED_BACKWARD", strided)
    B, H, N, D = 2, 2, 130, 64
    gen = torch.Generator(device="cuda").manual_seed(5)
    base = [rand((B, N, H, D), torch.float16, gen).requires_grad_() for _ in range(3)]
    q, k, v = (x.transpose(1, 2) for x in base)
    do = rand((B, H, N, D), torch.float16, gen)
    tessel.attention(q, k, v, causal=True).backward(do)
    got = [x.grad.transpose(1, 2).float() for x in base]
    leaves = [x.detach().transpose(1, 2).float().requires_grad_() for x in base]
    o, _ = reference(*leaves, True, 1 / math.sqrt(D))
    o.backward(do.float())
    for g, leaf in zip(got, leaves):
        assert (g - leaf.grad).abs().max().item() < 2e-2 * max(1.0, leaf.grad.abs().max().item())


def test_attention_inputs_requiring_grad_get_a_grad_fn():
    """Inputs that require grad go through autograd (tessel/backward.py): the output has a
    grad_fn; with grad mode off it has none. Numerics: test/gpu/test_attention_backward_gpu.py."""
    q = torch.randn(1, 2, 64, 64, device="cuda", dtype=torch.float16, requires_grad=True)
    k = torch.randn(1, 2, 64, 64, device="cuda", dtype=torch.float16)
    o = tessel.attention(q, k, k)
    assert o.grad_fn is not None
    with torch.no_grad():
        o = tessel.attention(q, k, k)
    assert o.grad_fn is None and not torch.isnan(o).any()


def test_tensors_past_i32_offsets_run_in_chunks(monkeypatch):
    # attention.I32_ELEMENTS lowered so that small tensors take the chunked path (one call per
    # batch, then per GQA group); outputs and gradients equal the one-call ones.
    import importlib
    att = importlib.import_module("tessel.attention")
    B, H, Hkv, N, D = 3, 4, 2, 200, 64
    gen = torch.Generator(device="cuda").manual_seed(17)
    base = [rand(s, torch.float16, gen) for s in ((B, H, N, D), (B, Hkv, N, D), (B, Hkv, N, D))]
    do = rand((B, H, N, D), torch.float16, gen)

    def run():
        leaves = [x.clone().requires_grad_() for x in base]
        o = tessel.attention(*leaves, causal=True, enable_gqa=True)
        o.backward(do)
        return [o] + [x.grad for x in leaves]

    want = run()
    for limit in (H * N * D + 1, H * N * D // 2 + 1):   # batches, then GQA groups
        monkeypatch.setattr(att, "I32_ELEMENTS", limit)
        for g, w in zip(run(), want):
            assert torch.equal(g, w)


def test_inputs_not_16_byte_aligned():
    # Contiguous views that start one element into a buffer: their rows cannot be copied in
    # 16-byte chunks in place, so they are copied first (before 2026-12-03 the fast path's
    # copies would have faulted). Forward and gradients against float32.
    B, H, N, D = 2, 4, 130, 64
    gen = torch.Generator(device="cuda").manual_seed(23)
    n = B * H * N * D
    bufs = [rand((n + 8,), torch.float16, gen) for _ in range(3)]
    q, k, v = (b[1:1 + n].view(B, H, N, D).requires_grad_() for b in
               (x.detach().clone() for x in bufs))
    assert q.data_ptr() % 16
    o = tessel.attention(q, k, v, causal=True)
    want, _ = reference(q.detach(), k.detach(), v.detach(), True, 1 / math.sqrt(D))
    err = (o.float() - want).abs().max().item()
    assert err < TOL[torch.float16] * max(1.0, want.abs().max().item()), err
    o.float().sum().backward()
    assert all(x.grad is not None and torch.isfinite(x.grad).all() for x in (q, k, v))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("case", ["window", "window causal", "softcap", "alibi causal",
                                  "alibi per batch", "all three"])
@pytest.mark.parametrize("D", [64, 128])
def test_flash_arguments_forward_and_gradients(dtype, case, D):
    # FlashAttention's window_size, softcap and alibi_slopes (flash_mods.py): the output against
    # float32 torch attention with the same bias and mask, the gradients by the backward tests'
    # rule (grad_check.py: against float64, within twice torch's own in the inputs' dtype).
    from grad_check import assert_within_twice_torch
    B, H, N = 2, 4, 1000
    gen = torch.Generator(device="cuda").manual_seed(D + len(case))
    base = [torch.randn(B, H, N, D, device="cuda", generator=gen).to(dtype) for _ in range(3)]
    causal = "causal" in case
    window = (200, 0 if causal else 50) if "window" in case or case == "all three" else None
    cap = 20.0 if case in ("softcap", "all three") else None
    slopes = None
    if "alibi" in case or case == "all three":
        shape = (B, H) if case == "alibi per batch" else (H,)
        slopes = torch.rand(shape, device="cuda", generator=gen) * 0.1
    qs, ks, vs = (x.clone().requires_grad_() for x in base)
    o = tessel.attention(qs, ks, vs, causal=causal, window_size=window, softcap=cap,
                         alibi_slopes=slopes)
    do = torch.randn(o.shape, device="cuda", generator=gen).to(dtype)
    o.backward(do)
    i = torch.arange(N, device="cuda")[:, None]
    j = torch.arange(N, device="cuda")[None, :]
    ok = torch.ones(N, N, dtype=torch.bool, device="cuda")
    if causal:
        ok &= i >= j
    if window:
        ok &= (j >= i - window[0]) & (j <= i + window[1])

    def torch_attention(as_dtype):
        q, k, v = (x.to(as_dtype).requires_grad_() for x in base)
        s = q @ k.transpose(-1, -2) / math.sqrt(D)
        if cap:
            s = cap * torch.tanh(s / cap)
        if slopes is not None:
            sl = (slopes if slopes.dim() == 2 else slopes[None]).to(as_dtype)
            s = s - sl[:, :, None, None] * (i - j).abs().to(as_dtype)
        out = torch.softmax(s.masked_fill(~ok, float("-inf")), -1) @ v
        out.backward(do.to(as_dtype))
        return out, (q.grad, k.grad, v.grad)
    want, want_grads = torch_attention(torch.float64)
    _, low_grads = torch_attention(dtype)
    assert (o.double() - want).abs().max().item() < TOL[dtype] * max(1.0,
                                                                     want.abs().max().item())
    assert_within_twice_torch((qs.grad, ks.grad, vs.grad), want_grads, low_grads)
