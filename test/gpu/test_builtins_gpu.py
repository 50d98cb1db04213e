"""Every documented builtin x every documented dtype on the GPU, on both lowerings a chip has
(the reference lowering and codegen=auto), against the same float64 references as the
interpreter test (test/python/builtin_cases.py; issue 14, item 3).

Run on a machine with a GPU and torch (skipped elsewhere):
    PYTHONPATH=build/python python3 -m pytest -q test/gpu/test_builtins_gpu.py
"""
import pathlib
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
import builtin_cases as bc  # noqa: E402
import tessel  # noqa: E402
import tessel.cache  # noqa: E402
from tessel import gpu  # noqa: E402
from tessel import language as tl  # noqa: E402


def launcher(codegen):
    def launch(kernel, *args, **constexprs):
        dev = [torch.from_numpy(np.ascontiguousarray(a)).cuda() for a in args]
        compiled = kernel.warmup(*dev, **constexprs)
        options = tessel.cache.GpuOptions(chip=gpu.chip_of(0), codegen=codegen)
        compiled.gpu_launcher(0, options).launch((1, 1, 1), gpu.stream_source(), *dev)
        torch.cuda.synchronize()
        args[-1][...] = dev[-1].cpu().numpy()
    return launch


# These small kernels are outside the fast paths' class: codegen auto lowers them with the
# reference lowering. The fast paths meet the builtins inside score_mod / mask_mod, below.
@pytest.mark.parametrize("codegen", ["auto"])
@pytest.mark.parametrize("kind,case,dtype", bc.all_cases())
def test_builtin_on_dtype_gpu(kind, case, dtype, codegen):
    if (case, dtype) in bc.EXPECTED_ERRORS:
        pytest.skip("a compile-time error, checked on the interpreter")
    rng = np.random.default_rng(abs(hash((kind, case, dtype))) % 2**32)
    a, b = bc.inputs(case, dtype, rng)
    out = np.full(bc.N, np.nan, np.float32)
    bc.run_case(kind, case, dtype, a, b, out, launcher(codegen))
    ref = bc.reference(kind, case, dtype, a, b)
    # The GPU's exp/log/tanh are approximations: a few ulp of f32.
    tol = max(bc.tolerance(dtype), 1e-5)
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol,
                               err_msg=f"{kind} {case} on {dtype} ({codegen})")


def test_scans_of_a_length_map_gpu():
    # tl.cumsum over 512 lengths (exclusive starts, a running count of a mask) and a reversed
    # f16 cumsum along rows, on the reference lowering (codegen auto lands there).
    (lens, x), out, want = bc.scan_inputs(np.random.default_rng(7))
    dev = [torch.from_numpy(a).cuda() for a in (lens, out[0], out[1], x, out[2])]
    bc.scan_kernel[(1,)](*dev, N=lens.size, M=x.shape[0])
    np.testing.assert_array_equal(dev[1].cpu().numpy(), want[0])
    np.testing.assert_array_equal(dev[2].cpu().numpy(), want[1])
    np.testing.assert_allclose(dev[4].cpu().numpy(), want[2], rtol=4e-3, atol=4e-3)


def test_random_numbers_gpu():
    # tl.randint4x with a Python and a run-time seed, and tl.rand over 8 programs, on the
    # row-blocked lowering: the bits of the numpy Philox (test_dsl_random.py), floats included.
    import test_dsl_random as tr
    n = 256
    for seed_arg, seed_const, key in [(0, 2**40 + 3, (3, 256)), (-3, None, (2**32 - 3, 2**32 - 1))]:
        out = torch.zeros((4, n), dtype=torch.int32, device="cuda")
        tr.bits[(1,)](out, seed_arg, 1 << 20, N=n, SEED=seed_const, ROUNDS=10)
        ctr = [np.arange(1 << 20, (1 << 20) + n)] + [np.zeros(n)] * 3
        want = np.stack(tr.philox_reference(ctr, key))
        np.testing.assert_array_equal(out.cpu().numpy().view(np.uint32), want)
    u = torch.zeros(8 * 1024, dtype=torch.float32, device="cuda")
    tr.uniform[(8,)](u, 2024, N=1024)
    x = tr.philox_reference([np.arange(u.numel())] + [np.zeros(u.numel())] * 3, (2024, 0))[0]
    np.testing.assert_array_equal(u.cpu().numpy(), tr.uniform_reference(x))


# ---- tessel.attention on the GPU with the issue-14 semantics ---------------------------------

def attention_reference(q, k, v, allowed):
    """float32 attention with a boolean [Nq, Nk] mask on the GPU; fully masked rows give 0."""
    q, k, v = q.float(), k.float(), v.float()
    s = torch.einsum("bhqd,bhkd->bhqk", q, k) / q.shape[-1] ** 0.5
    s = s.masked_fill(~allowed, float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return p @ v


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("D", [64, 128])
def test_causal_with_an_unclassified_modulo_mask(dtype, D):
    """causal & (q - kv) % 4 == 1: Python's %, the split keeping causal skipping, on the fast
    path (remark says what was classified) — against torch, whose % is Python's too."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    n = 1000
    q, k, v = (torch.randn((1, 2, n, D), generator=gen, device="cuda").to(dtype)
               for _ in range(3))
    o = tessel.attention(q, k, v, causal=True,
                         mask_mod=lambda b, h, q_idx, kv_idx: (q_idx - kv_idx) % 4 == 1)
    i = torch.arange(n, device="cuda")
    allowed = (i[:, None] >= i[None, :]) & ((i[:, None] - i[None, :]) % 4 == 1)
    ref = attention_reference(q, k, v, allowed)
    err = (o.float() - ref).abs().max().item()
    assert err < (5e-3 if dtype == torch.float16 else 2e-2), err


def test_changed_global_on_the_gpu_launch_path():
    global GPU_WINDOW
    gen = torch.Generator(device="cuda").manual_seed(1)
    q, k, v = (torch.randn((1, 2, 600, 64), generator=gen, device="cuda").half()
               for _ in range(3))
    i = torch.arange(600, device="cuda")
    try:
        for w in (8, 200, 8):
            GPU_WINDOW = w
            o = tessel.attention(q, k, v, mask_mod=window)
            allowed = (i[:, None] >= i[None, :]) & (i[:, None] - i[None, :] < w)
            err = (o.float() - attention_reference(q, k, v, allowed)).abs().max().item()
            assert err < 5e-3, (w, err)
    finally:
        GPU_WINDOW = 8


GPU_WINDOW = 8


def window(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx < GPU_WINDOW)


# score_mod / mask_mod using integer abs, floor division, cdiv, where, maximum: traced into the
# attention kernel, so lowered by the fast path (wgmma on sm_90a, mma.sync on sm_80).
MODS = {
    "abs_bias": (dict(score_mod=lambda s, b, h, q_idx, kv_idx:
                      s - 0.05 * tl.abs(q_idx - kv_idx).to(tl.float32)),
                 lambda s, i, j: s - 0.05 * (i - j).abs().float(), None),
    "blocks_of_3": (dict(mask_mod=lambda b, h, q_idx, kv_idx: q_idx // 3 >= kv_idx // 3),
                     None, lambda i, j: torch.div(i, 3, rounding_mode="floor")
                     >= torch.div(j, 3, rounding_mode="floor")),
    "cdiv_blocks": (dict(mask_mod=lambda b, h, q_idx, kv_idx:
                         tl.cdiv(q_idx + 1, 4) >= tl.cdiv(kv_idx + 1, 4)),
                    None, lambda i, j: -(-(i + 1) // 4) >= -(-(j + 1) // 4)),
    "relu_where": (dict(score_mod=lambda s, b, h, q_idx, kv_idx:
                        tl.where((q_idx - kv_idx) % 3 == 0, tl.maximum(s, 0.0), s)),
                   lambda s, i, j: torch.where((i - j) % 3 == 0, s.clamp(min=0.0), s), None),
}


@pytest.mark.parametrize("name", list(MODS))
def test_builtins_in_mods_on_the_fast_path(name):
    mods, score, mask = MODS[name]
    gen = torch.Generator(device="cuda").manual_seed(2)
    n, D = 700, 64
    q, k, v = (torch.randn((1, 2, n, D), generator=gen, device="cuda").half() for _ in range(3))
    o = tessel.attention(q, k, v, **mods)
    i = torch.arange(n, device="cuda")[:, None]
    j = torch.arange(n, device="cuda")[None, :]
    qf, kf, vf = q.float(), k.float(), v.float()
    s = torch.einsum("bhqd,bhkd->bhqk", qf, kf) / D ** 0.5
    if score is not None:
        s = score(s, i, j)
    if mask is not None:
        s = s.masked_fill(~mask(i, j), float("-inf"))
    ref = torch.softmax(s, dim=-1).nan_to_num(0.0) @ vf
    err = (o.float() - ref).abs().max().item()
    assert err < 5e-3, err
