"""torch CPU tensors at the attention entry points run on the CPU interpreter
(python/tessel/cpu_tensors.py): outputs as tensors of the inputs' dtype, autograd through
attention_backward, the serving functions, captured CPU tensors and block masks. Against
float64 torch on fresh random inputs."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import dsl_helpers  # noqa: F401,E402 (puts the build's package on the path)
import tessel  # noqa: E402

TOL = {torch.float32: 2e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}


def _rand(*shape, dtype=torch.float32, seed=0, grad=False):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)
    return x.requires_grad_() if grad else x


def _reference(q, k, v, causal=False, scale=None, mask=None):
    """float64 attention and its LSE, on any head layout (GQA by repetition)."""
    q, k, v = (x.double() for x in (q, k, v))
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    s = q @ k.transpose(-1, -2) * (q.shape[-1] ** -0.5 if scale is None else scale)
    keep = torch.ones(s.shape[-2:], dtype=torch.bool)
    if causal:
        keep = keep.tril()
    if mask is not None:
        keep = keep & mask
    s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_forward_on_cpu_tensors(dtype, causal):
    q = _rand(2, 4, 37, 64, dtype=dtype, seed=1)
    k, v = _rand(2, 2, 45, 64, dtype=dtype, seed=2), _rand(2, 2, 45, 64, dtype=dtype, seed=3)
    o, lse = tessel.attention(q, k, v, causal=causal, enable_gqa=True, return_lse=True)
    assert isinstance(o, torch.Tensor) and o.dtype == dtype and o.device.type == "cpu"
    assert o.shape == q.shape and lse.dtype == torch.float32 and lse.shape == (2, 4, 37)
    want, want_lse = _reference(q, k, v, causal)
    torch.testing.assert_close(o.double(), want, atol=TOL[dtype], rtol=0)
    torch.testing.assert_close(lse.double(), want_lse, atol=1e-4, rtol=1e-5)


def test_strided_cpu_tensors_are_read_in_place():
    # FlashAttention's [B, N, H, D] seen as [B, H, N, D]: a numpy view of the same memory.
    x = _rand(1, 50, 2, 32, seed=4).transpose(1, 2)
    assert not x.is_contiguous()
    o = tessel.attention(x, x, x, causal=True)
    torch.testing.assert_close(o.double(), _reference(x, x, x, True)[0], atol=2e-5, rtol=0)


def test_gradients_of_cpu_tensors():
    q, k, v = (_rand(1, 2, 33, 32, seed=s, grad=True) for s in (5, 6, 7))
    o, lse = tessel.attention(q, k, v, causal=True, return_lse=True)
    assert o.grad_fn is not None
    g = _rand(1, 2, 33, 32, seed=8)
    ((o * g).sum() + lse.square().sum()).backward()
    ref = [x.detach().double().requires_grad_() for x in (q, k, v)]
    ro, rl = _reference(*ref, causal=True)
    ((ro * g.double()).sum() + rl.square().sum()).backward()
    for got, want in zip((q, k, v), ref):
        assert got.grad.dtype == torch.float32
        torch.testing.assert_close(got.grad.double(), want.grad, atol=5e-5, rtol=0)


def test_gradients_with_flash_arguments_and_gqa():
    # window_size, softcap and ALiBi slopes given as a CPU tensor; bf16; k and v only.
    q = _rand(1, 4, 40, 64, dtype=torch.bfloat16, seed=9)
    k, v = (_rand(1, 2, 40, 64, dtype=torch.bfloat16, seed=s, grad=True) for s in (10, 11))
    slopes = torch.tensor([0.5, 0.25, 0.125, 0.0625])
    kw = dict(causal=True, enable_gqa=True, window_size=(7, 0), softcap=20.0, alibi_slopes=slopes)
    o = tessel.attention(q, k, v, **kw)
    o.float().sum().backward()
    assert q.grad is None and k.grad.dtype == torch.bfloat16 and v.grad.shape == v.shape
    # The same backward on numpy arrays: the same bits.
    from tessel.cpu_tensors import to_numpy
    qn, kn, vn = (to_numpy(x) for x in (q, k, v))
    on, lse = tessel.attention(qn, kn, vn, return_lse=True, **dict(kw, alibi_slopes=slopes.numpy()))
    assert np.array_equal(on, to_numpy(o))
    _, dk, dv = tessel.attention_backward(qn, kn, vn, on, lse, np.full_like(on, to_numpy(
        torch.ones((), dtype=torch.bfloat16)).item()), **dict(kw, alibi_slopes=slopes.numpy()))
    assert np.array_equal(dk, to_numpy(k.grad)) and np.array_equal(dv, to_numpy(v.grad))


def test_compile_attention_traces_cpu_tensors():
    q = _rand(1, 2, 40, 64, dtype=torch.bfloat16, seed=26)
    k = tessel.compile_attention(q, q, q, causal=True)
    assert k.specialization == tessel.compile_attention(
        *(tessel.cpu_tensors.to_numpy(q),) * 3, causal=True).specialization


def test_no_grad_and_detached_calls_have_no_grad_fn():
    q = _rand(1, 1, 16, 32, seed=12, grad=True)
    with torch.no_grad():
        assert tessel.attention(q, q, q).grad_fn is None
    assert tessel.attention(q.detach(), q.detach(), q.detach()).grad_fn is None


def test_attention_backward_on_cpu_tensors():
    q, k, v, do = (_rand(1, 2, 24, 32, seed=s) for s in (13, 14, 15, 16))
    o, lse = tessel.attention(q, k, v, causal=True, return_lse=True)
    dq, dk, dv = tessel.attention_backward(q, k, v, o, lse, do, causal=True)
    ref = [x.double().requires_grad_() for x in (q, k, v)]
    (_reference(*ref, causal=True)[0] * do.double()).sum().backward()
    for got, want in zip((dq, dk, dv), ref):
        assert isinstance(got, torch.Tensor)
        torch.testing.assert_close(got.double(), want.grad, atol=5e-5, rtol=0)


def test_serving_on_cpu_tensors():
    lens = [5, 17, 9]
    cu = torch.tensor(np.cumsum([0] + lens), dtype=torch.int32)
    q, k, v = (_rand(sum(lens), 2, 32, seed=s) for s in (17, 18, 19))
    o = tessel.attention_varlen(q, k, v, cu, cu, max(lens), max(lens), causal=True)
    assert isinstance(o, torch.Tensor) and o.shape == q.shape
    for b in range(3):
        s = slice(cu[b].item(), cu[b + 1].item())
        want = _reference(*(x[s].transpose(0, 1)[None] for x in (q, k, v)), causal=True)[0]
        torch.testing.assert_close(o[s].transpose(0, 1)[None].double(), want, atol=2e-5, rtol=0)
    cache_k, cache_v = (_rand(2, 20, 1, 32, seed=s) for s in (20, 21))
    qd = _rand(2, 1, 2, 32, seed=22)
    seqlens = torch.tensor([20, 7], dtype=torch.int32)
    od = tessel.attention_with_kvcache(qd, cache_k, cache_v, seqlens)
    for b, n in enumerate(seqlens.tolist()):
        want = _reference(qd[b:b + 1].transpose(1, 2), cache_k[b:b + 1, :n].transpose(1, 2),
                          cache_v[b:b + 1, :n].transpose(1, 2))[0]
        torch.testing.assert_close(od[b:b + 1].transpose(1, 2).double(), want, atol=2e-5,
                                   rtol=0)
    with pytest.raises(NotImplementedError, match="q requires grad"):
        tessel.attention_with_kvcache(qd.requires_grad_(), cache_k, cache_v, seqlens)


def test_mask_reading_a_captured_cpu_tensor():
    # A document mask over ids held in a CPU tensor: captured as the interpreter's array, with
    # and without a block mask built like q.
    ids = torch.tensor([0] * 20 + [1] * 25 + [2] * 19, dtype=torch.int32)

    def document(b, h, q_idx, kv_idx):
        return ids[q_idx] == ids[kv_idx]

    q, k, v = (_rand(1, 2, 64, 32, seed=s) for s in (23, 24, 25))
    want = _reference(q, k, v, mask=ids[:, None] == ids[None, :])[0]
    o = tessel.attention(q, k, v, mask_mod=document)
    torch.testing.assert_close(o.double(), want, atol=2e-5, rtol=0)
    bm = tessel.block_mask(document, None, None, 64, 64, BLOCK_M=32, BLOCK_N=32, like=q)
    o = tessel.attention(q, k, v, mask_mod=document, block_mask=bm)
    torch.testing.assert_close(o.double(), want, atol=2e-5, rtol=0)
    ids.requires_grad_(False)
    weights = torch.ones(64, requires_grad=True)

    def weighted(score, b, h, q_idx, kv_idx):
        return score * weights[kv_idx]

    with pytest.raises(tessel.CompilationError, match="requires grad"):
        tessel.attention(q, k, v, score_mod=weighted)


def test_unsupported_cpu_tensors_are_named():
    x = _rand(1, 1, 8, 16, dtype=torch.float64)
    with pytest.raises(TypeError, match=r"q is torch.float64; CPU tensors run as float32"):
        tessel.attention(x, x, x)
    with pytest.raises(ValueError, match=r"differ in head dim \(16 and 32\)"):
        tessel.attention(x.float(), _rand(1, 1, 8, 32), _rand(1, 1, 8, 32))
    cu = torch.tensor([0, 8], dtype=torch.int32)
    with pytest.raises(TypeError, match="attention_varlen: k is torch.float64"):
        tessel.attention_varlen(x[0, 0, :, None].float(), x[0, 0, :, None], x[0, 0, :, None],
                                cu, cu, 8, 8)


def test_fp8_cpu_tensors():
    # float8_e4m3fn CPU tensors as the interpreter's uint8 bit patterns; out_dtype and descales
    # given as torch values; the output a CPU tensor of out_dtype (bfloat16 by default).
    q = _rand(1, 2, 40, 128, seed=27).to(torch.float8_e4m3fn)
    o = tessel.attention(q, q, q, causal=True, descale_q=torch.tensor(0.5),
                         out_dtype=torch.float16)
    assert o.dtype == torch.float16 and o.shape == q.shape
    x = q.double()
    want = _reference(x * 0.5, x, x, True)[0]
    # P rounded to e4m3 before P·V (FlashAttention-3's recipe): test_dsl_fp8.py's bound.
    assert (o.double() - want).abs().max() <= 0.04 * want.abs().max()
    assert tessel.attention(q, q, q).dtype == torch.bfloat16


@pytest.mark.parametrize("E,Ev", [(48, 32), (32, 48), (192, 128)])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_value_head_dim_of_its_own(E, Ev, causal):
    """v's head dim Ev may differ from q's and k's E (PyTorch SDPA's Ev; DeepSeek's MLA prefill
    is 192/128): o has Ev columns, the scale is 1/sqrt(E), and the gradients flow to q, k and v
    (the smaller side is padded with zero columns, which torch's autograd cuts back)."""
    q = _rand(2, 4, 37, E, seed=1, grad=True)
    k = _rand(2, 2, 50, E, seed=2, grad=True)
    v = _rand(2, 2, 50, Ev, seed=3, grad=True)
    o, lse = tessel.attention(q, k, v, causal=causal, enable_gqa=True, return_lse=True)
    assert o.shape == (2, 4, 37, Ev) and o.is_contiguous() and lse.shape == (2, 4, 37)
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    s = q64 @ k64.repeat_interleave(2, dim=1).transpose(-1, -2) / E ** 0.5
    if causal:
        s = s.masked_fill(~torch.ones(37, 50, dtype=torch.bool).tril(), float("-inf"))
    ref = torch.softmax(s, dim=-1) @ v64.repeat_interleave(2, dim=1)
    assert (o.double() - ref).abs().max().item() < 1e-5
    assert (lse.double() - torch.logsumexp(s, dim=-1)).abs().max().item() < 1e-5
    do = _rand(2, 4, 37, Ev, seed=4)
    o.backward(do)
    ref.backward(do.double())
    for got, want in zip((q.grad, k.grad, v.grad), (q64.grad, k64.grad, v64.grad)):
        assert got.shape == want.shape
        assert (got.double() - want).abs().max().item() < 1e-4


def test_value_head_dim_refusals():
    q, k = _rand(1, 2, 9, 40), _rand(1, 2, 9, 40)
    with pytest.raises(ValueError, match=r"q .* and k .* differ in head dim \(40 and 32\)"):
        tessel.attention(q, _rand(1, 2, 9, 32), _rand(1, 2, 9, 40))
    with pytest.raises(ValueError, match="k and v differ in shape"):
        tessel.attention(q, k, _rand(1, 2, 8, 24))
    # The kernels' own callers keep one head dim, with a clear error.
    from tessel.attention import _check_shapes
    with pytest.raises(ValueError, match="differ in head dim: here q, k and v need one"):
        _check_shapes(q.shape, k.shape, (1, 2, 9, 24), False)


@pytest.mark.parametrize("E,Ev", [(48, 32), (32, 48)])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_varlen_value_head_dim_of_its_own(E, Ev, causal):
    """attention_varlen with v of its own head dim (flash_attn_varlen_func's hdim_v): each
    packed sequence against float64, gradients included."""
    cu = torch.tensor([0, 7, 20, 33], dtype=torch.int32)
    q = _rand(33, 4, E, seed=5, grad=True)
    k = _rand(33, 2, E, seed=6, grad=True)
    v = _rand(33, 2, Ev, seed=7, grad=True)
    o = tessel.attention_varlen(q, k, v, cu, cu, 13, 13, causal=causal)
    assert o.shape == (33, 4, Ev)
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    outs = []
    for s0, s1 in zip(cu[:-1].tolist(), cu[1:].tolist()):
        qq = q64[s0:s1].transpose(0, 1)
        kk, vv = (x[s0:s1].transpose(0, 1).repeat_interleave(2, dim=0) for x in (k64, v64))
        s = qq @ kk.transpose(-1, -2) / E ** 0.5
        if causal:
            s = s.masked_fill(~torch.ones(s1 - s0, s1 - s0, dtype=torch.bool).tril(),
                              float("-inf"))
        outs.append((torch.softmax(s, dim=-1) @ vv).transpose(0, 1))
    ref = torch.cat(outs)
    assert (o.double() - ref).abs().max().item() < 1e-5
    do = _rand(33, 4, Ev, seed=8)
    o.backward(do)
    ref.backward(do.double())
    for got, want in zip((q.grad, k.grad, v.grad), (q64.grad, k64.grad, v64.grad)):
        assert (got.double() - want).abs().max().item() < 1e-4


@pytest.mark.parametrize("E,Ev", [(48, 32), (32, 48)])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_varlen_value_head_dim_kernel(monkeypatch, E, Ev, causal):
    """serving_checks.VARLEN_VALUE_HEAD_DIM_KERNEL (on since its GPU check): v of its own head
    dim through the varlen kernel's DV instead of padding, on the interpreter (numpy and CPU
    tensors without gradients): the padded call's output and LSE, within float32 rounding;
    the kernel specialised on DV. Tensors that need gradients keep the padded route."""
    from tessel import serving, serving_checks
    cu = torch.tensor([0, 7, 20, 33], dtype=torch.int32)
    q, k, v = _rand(33, 4, E, seed=5), _rand(33, 2, E, seed=6), _rand(33, 2, Ev, seed=7)
    want, want_lse = tessel.attention_varlen(q, k, v, cu, cu, 13, 13, causal=causal,
                                             return_lse=True)
    monkeypatch.setattr(serving_checks, "VARLEN_VALUE_HEAD_DIM_KERNEL", True)
    launched = []
    real = serving._launch
    monkeypatch.setattr(serving, "_launch", lambda kernel, grid, args, cx: launched.append(
        cx.get("DV")) or real(kernel, grid, args, cx))
    for x in (q, q.numpy()):
        args = (x, k, v) if x is q else (x, k.numpy(), v.numpy())
        o, lse = tessel.attention_varlen(*args, cu if x is q else cu.numpy(),
                                         cu if x is q else cu.numpy(), 13, 13, causal=causal,
                                         return_lse=True)
        assert tuple(o.shape) == (33, 4, Ev)
        assert np.abs(np.asarray(o) - want.numpy()).max() < 1e-6
        assert np.abs(np.asarray(lse) - want_lse.numpy()).max() < 1e-5
    assert launched == [Ev, Ev]
    grad = q.clone().requires_grad_()
    assert not serving._varlen_dv(grad, k, v)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_varlen_padded_head_dim_route(monkeypatch, causal):
    """attention_varlen's padded route (CUDA fp16/bf16 head dims below 128 but 64 run at 64 or
    128: serving._varlen_padded_dim), forced here on CPU tensors at head dim 40 → 64: the same
    output, LSE and gradients as the unpadded call, o of the caller's 40 columns."""
    from tessel import serving
    cu = torch.tensor([0, 7, 20, 33], dtype=torch.int32)
    base = [_rand(33, 4, 40, seed=9 + i) for i in range(3)]
    do = _rand(33, 4, 40, seed=12)

    def run():
        q, k, v = (x.clone().requires_grad_() for x in base)
        o, lse = tessel.attention_varlen(q, k, v, cu, cu, 13, 13, causal=causal,
                                         return_lse=True)
        o.backward(do)
        return o, lse, [x.grad for x in (q, k, v)]
    want = run()
    calls = []
    real = serving._varlen_padded_dim
    monkeypatch.setattr(serving, "_varlen_padded_dim",
                        lambda q, k, v: calls.append(q.shape[-1]) or
                        (64 if q.shape[-1] == 40 else real(q, k, v)))
    got = run()
    assert calls[0] == 40 and 64 in calls          # padded, then the padded call itself
    assert got[0].shape == (33, 4, 40) and got[0].is_contiguous()
    assert (got[0] - want[0]).abs().max().item() < 1e-6
    assert (got[1] - want[1]).abs().max().item() < 1e-6
    for g, w in zip(got[2], want[2]):
        assert g.shape == w.shape and (g - w).abs().max().item() < 1e-5
