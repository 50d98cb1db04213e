"""The attention backward on the GPU, through autograd (issue 11).

Run on a machine with a GPU and torch (skipped elsewhere):
    TESSEL_CACHE_DIR=$(mktemp -d) python3 -m pytest -q test/gpu/test_attention_backward_gpu.py
fp16/bf16 at head dims 64 and 128 take the fast paths (the dQ program and the key-rows dK/dV
program through codegen auto: wgmma on sm_90a, mma.sync on sm_80); fp32 the three programs on
the reference lowering (convert-tile-to-gpu). dq, dk, dv of tessel.attention (fp16, bf16, fp32) are compared with
torch's float64 autograd of the same attention written out in torch; the error bound follows
FlashAttention's rule where PyTorch's own SDPA applies: at most twice the error of SDPA's
backward on the fp16/bf16 inputs, plus a small absolute slack.
"""
import importlib
import math
import zlib

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tessel  # noqa: E402
from grad_check import assert_within_twice_torch  # noqa: E402
from tessel import language as tl  # noqa: E402

CAP = 20.0


@tessel.jit
def softcap(score, b, h, q_idx, kv_idx):
    return CAP * tl.tanh(score / CAP)


@tessel.jit
def alibi(score, b, h, q_idx, kv_idx):
    slope = tl.exp2(-(h + 1).to(tl.float32))
    return score + slope * (kv_idx - q_idx).to(tl.float32)


def reference(q, k, v, causal, score=None):
    """float64 attention in torch (autograd gives the reference gradients)."""
    H, Hkv = q.shape[1], k.shape[1]
    k = k.repeat_interleave(H // Hkv, dim=1)
    v = v.repeat_interleave(H // Hkv, dim=1)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    nq, nk = s.shape[-2:]
    qi = torch.arange(nq, device=q.device)[:, None]
    ki = torch.arange(nk, device=q.device)[None, :]
    if score is not None:
        s = score(s, qi, ki)
    if causal:
        s = s.masked_fill(qi < ki, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


SCORES = {None: None, "softcap": lambda s, qi, ki: CAP * torch.tanh(s / CAP),
          # alibi's slope of head h is 2^-(h + 1)
          "alibi": lambda s, qi, ki: s + torch.exp2(-torch.arange(
              1, s.shape[1] + 1, dtype=s.dtype, device=s.device))[:, None, None] * (ki - qi)}
MODS = {None: None, "softcap": softcap, "alibi": alibi}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32],
                         ids=["f16", "bf16", "f32"])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", [(1, 2, 2, 128, 128), (2, 2, 1, 100, 77), (1, 2, 2, 1, 17),
                                   (1, 4, 2, 515, 700)],
                         ids=["128", "gqa-100x77", "1x17", "gqa-515x700"])
@pytest.mark.parametrize("mod", [None, "softcap", "alibi"])
def test_backward_matches_float64_autograd(dtype, D, causal, shape, mod):
    check_backward(dtype, D, causal, shape, mod)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("D", [32, 96, 192, 256])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_backward_at_other_head_dims(dtype, D, causal):
    """Head dim 256 (the fast backward on sm_90a, the reference lowering on sm_80) and head dims
    tessel.attention pads to the next of 64/128/256: the gradients flow back through the
    padding to the caller's D columns."""
    check_backward(dtype, D, causal, (1, 4, 2, 300, 257), "softcap" if causal else None)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", [(1, 4, 2, 300, 257), (2, 2, 2, 512, 512), (1, 2, 1, 77, 1000)],
                         ids=["gqa-300x257", "512", "mqa-77x1000"])
@pytest.mark.parametrize("mod", [None, "softcap", "alibi"])
def test_native_head_dim_192_backward(monkeypatch, dtype, causal, shape, mod):
    """backward.NATIVE_BACKWARD_HEAD_DIMS (on since this passed): d192 on sm_90a as it is,
    forward and backward (three 64-column slabs; the key-rows program split into dV and dK),
    not padded to 256: tessel.attention's gradients against float64 autograd, GQA/MQA, ragged
    and whole blocks, mods."""
    import tessel.backward as bw
    attn = importlib.import_module("tessel.attention")
    if tessel.gpu.chip_of(torch.cuda.current_device()) != "sm_90a":
        pytest.skip("d192 runs natively on sm_90a only")
    monkeypatch.setattr(bw, "NATIVE_BACKWARD_HEAD_DIMS", {"sm_90a": (192,)})
    monkeypatch.setattr(attn, "NATIVE_HEAD_DIMS", {"sm_90a": (192,)})
    monkeypatch.setattr(attn, "_attention_padded", lambda *a, **kw: pytest.fail("padded"))
    check_backward(dtype, 192, causal, shape, mod)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", [(1, 4, 2, 300, 257), (2, 2, 2, 512, 512)],
                         ids=["gqa-300x257", "512"])
@pytest.mark.parametrize("D,mod", [(96, None), (80, "softcap"), (40, None), (160, "alibi")])
def test_block_head_dim_backward(monkeypatch, dtype, causal, shape, D, mod):
    """backward.BLOCK_HEAD_DIM_CHIPS with the forward's attention.BLOCK_HEAD_DIM_CHIPS: head
    dims padded_head_dim pads (Phi-3's 96, 80, 40, 160) run forward and backward with blocks
    of the padded head dim over the tensors as they are (the programs' DB), nothing copied
    padded: tessel.attention's gradients against float64 autograd, GQA, ragged and whole
    blocks, mods."""
    import tessel.backward as bw
    attn = importlib.import_module("tessel.attention")
    chip = tessel.gpu.chip_of(torch.cuda.current_device())
    if D == 160 and chip != "sm_90a":
        pytest.skip("head dim 256's fast backward is sm_90a's")
    monkeypatch.setattr(bw, "BLOCK_HEAD_DIM_CHIPS", (chip,))
    monkeypatch.setattr(attn, "BLOCK_HEAD_DIM_CHIPS", (chip,))
    monkeypatch.setattr(attn, "_attention_padded", lambda *a, **kw: pytest.fail("padded"))
    monkeypatch.setattr(bw, "_backward_padded", lambda *a, **kw: pytest.fail("padded"))
    monkeypatch.setattr(bw, "gpu_backward_blocks", lambda *a: pytest.fail("reference"))
    check_backward(dtype, D, causal, shape, mod)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("D", [96, 80])
@pytest.mark.parametrize("window", [(100, 0), (64, 64)], ids=["left", "both"])
def test_block_head_dim_with_masks(monkeypatch, dtype, D, window):
    """attention.BLOCK_HEAD_DIM_MASKS (off until this passes): window_size (a mask_mod that
    reads no tensor) at head dims the fast paths pad, forward and backward inside the kernels
    (DB with the dense kernels' MASK_MOD), nothing copied: o and the gradients against float64
    autograd under the window's mask, GQA, ragged lengths."""
    import tessel.backward as bw
    attn = importlib.import_module("tessel.attention")
    chip = tessel.gpu.chip_of(torch.cuda.current_device())
    monkeypatch.setattr(attn, "BLOCK_HEAD_DIM_MASKS", True)
    monkeypatch.setattr(bw, "BLOCK_HEAD_DIM_CHIPS", (chip,))
    monkeypatch.setattr(attn, "BLOCK_HEAD_DIM_CHIPS", (chip,))
    monkeypatch.setattr(attn, "_attention_padded", lambda *a, **kw: pytest.fail("padded"))
    monkeypatch.setattr(bw, "_backward_padded", lambda *a, **kw: pytest.fail("padded"))
    monkeypatch.setattr(bw, "gpu_backward_blocks", lambda *a: pytest.fail("reference"))
    B, H, Hkv, Nq, Nk = 1, 4, 2, 300, 257
    gen = torch.Generator(device="cuda").manual_seed(D + window[1])
    q, k, v = (torch.randn(B, h, n, D, device="cuda", generator=gen).to(dtype)
               for h, n in ((H, Nq), (Hkv, Nk), (Hkv, Nk)))
    do = torch.randn(B, H, Nq, D, device="cuda", generator=gen).to(dtype)
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    o = tessel.attention(*leaves, enable_gqa=True, window_size=window)
    o.backward(do)
    i = torch.arange(Nq, device="cuda")[:, None]
    j = torch.arange(Nk, device="cuda")[None, :]
    hidden = (j < i - window[0]) | (j > i + window[1])

    def run(t):
        ls = [x.to(t).requires_grad_() for x in (q, k, v)]
        kk, vv = (x.repeat_interleave(H // Hkv, dim=1) for x in ls[1:])
        s = (ls[0] @ kk.transpose(-1, -2) / math.sqrt(D)).masked_fill(hidden, float("-inf"))
        out = torch.softmax(s, dim=-1) @ vv
        out.backward(do.to(t))
        return out, [x.grad for x in ls]
    ref_o, want = run(torch.float64)
    _, low = run(dtype)
    err = ((o.double() - ref_o).abs().max() / ref_o.abs().max()).item()
    assert err < (5e-3 if dtype == torch.float16 else 2e-2), err
    assert_within_twice_torch([x.grad for x in leaves], want, low)


@pytest.mark.parametrize("inside", [False, True], ids=["copies", "in-kernel"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [96, 80])
def test_attention_backward_at_padded_head_dims(monkeypatch, inside, causal, D):
    """tessel.attention_backward called itself (as attention_varlen's backward and the ring's
    do) at a head dim the forward pads: the fast programs on padded copies (_backward_padded),
    or with BLOCK_HEAD_DIM_CHIPS on the tensors as they are — never the reference lowering —
    against float64 autograd, GQA and ragged lengths, with a gradient on the LSE."""
    import tessel.backward as bw
    chip = tessel.gpu.chip_of(torch.cuda.current_device())
    monkeypatch.setattr(bw, "BLOCK_HEAD_DIM_CHIPS", (chip,) if inside else ())
    monkeypatch.setattr(bw, "gpu_backward_blocks", lambda *a: pytest.fail("reference"))
    padded = []
    real = bw._backward_padded
    monkeypatch.setattr(bw, "_backward_padded", lambda *a: padded.append(1) or real(*a))
    gen = torch.Generator(device="cuda").manual_seed(D + causal)
    B, H, Hkv, Nq, Nk = 2, 4, 2, 300, 257
    q, k, v = (torch.randn(B, h, n, D, device="cuda", generator=gen).half()
               for h, n in ((H, Nq), (Hkv, Nk), (Hkv, Nk)))
    do = torch.randn(B, H, Nq, D, device="cuda", generator=gen).half()
    dlse = torch.randn(B, H, Nq, device="cuda", generator=gen)
    o, lse = tessel.attention(q, k, v, causal=causal, enable_gqa=True, return_lse=True)
    got = tessel.attention_backward(q, k, v, o, lse, do, causal=causal, enable_gqa=True,
                                    dlse=dlse)
    assert bool(padded) != inside

    def grads(dtype):
        leaves = [x.to(dtype).requires_grad_() for x in (q, k, v)]
        kk, vv = (x.repeat_interleave(H // Hkv, dim=1) for x in leaves[1:])
        s = leaves[0] @ kk.transpose(-1, -2) / math.sqrt(D)
        if causal:
            s = s.masked_fill(torch.ones(Nq, Nk, dtype=torch.bool, device="cuda").triu(1),
                              float("-inf"))
        out = torch.softmax(s, dim=-1) @ vv
        (out * do.to(dtype)).sum().add_((torch.logsumexp(s, dim=-1) * dlse.to(dtype)).sum()) \
            .backward()
        return [x.grad for x in leaves]
    assert_within_twice_torch(got, grads(torch.float64), grads(torch.float16))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("mod", [None, "softcap"])
@pytest.mark.parametrize("table,blocks", [("KEYROWS_DK_BLOCK_M", 32),
                                          ("FAST_DQ_BLOCKS_SM90", (64, 32))], ids=["dk32", "dq64x32"])
def test_d256_candidate_blocks(monkeypatch, causal, mod, table, blocks):
    """d256's candidate blocks, which spill less on ptxas' word (docs/dev/backward.md), before
    either can become a default: the split's dK program on 32-row query blocks
    (KEYROWS_DK_BLOCK_M), the dQ program on 32-key blocks (FAST_DQ_BLOCKS_SM90); ragged
    lengths, GQA."""
    import tessel.backward as bw
    if 256 not in bw.SPLIT_KEYROWS:
        pytest.skip("d256's key-rows program is not split")
    monkeypatch.setattr(bw, table, {256: blocks})
    check_backward(torch.float16, 256, causal, (1, 4, 2, 300, 257), mod)
    check_backward(torch.bfloat16, 256, causal, (2, 2, 2, 512, 512), mod)


def check_backward(dtype, D, causal, shape, mod):
    """tessel.attention's gradients against float64 autograd (within twice PyTorch's error)."""
    B, H, Hkv, Nq, Nk = shape
    # A seed from the case, the same in every process (hash() of a str is salted per process:
    # a failure seen once could not be run again).
    gen = torch.Generator(device="cuda").manual_seed(
        zlib.crc32(repr((D, causal, shape, mod)).encode()) & 0xFFFF)

    def rand(*s):
        return torch.randn(*s, device="cuda", generator=gen).to(dtype)

    q, k, v = rand(B, H, Nq, D), rand(B, Hkv, Nk, D), rand(B, Hkv, Nk, D)
    do = rand(B, H, Nq, D)
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    o = tessel.attention(*leaves, causal=causal, score_mod=MODS[mod], enable_gqa=H != Hkv)
    assert o.grad_fn is not None
    o.backward(do)
    got = [x.grad for x in leaves]

    ref_leaves = [x.double().requires_grad_() for x in (q, k, v)]
    reference(*ref_leaves, causal, SCORES[mod]).backward(do.double())
    want = [x.grad for x in ref_leaves]

    # What the same computation in the inputs' precision costs (PyTorch's own backward).
    low_leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    reference(*low_leaves, causal, SCORES[mod]).backward(do)
    for name, g, w in zip(("dq", "dk", "dv"), got, want):
        assert g.dtype == dtype and g.shape == w.shape, name
        assert not torch.isnan(g).any(), name
    assert_within_twice_torch(got, want, [x.grad for x in low_leaves])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("D", [64, 128])
def test_backward_of_mods_that_read_tensors(dtype, D):
    """A document mask and a relative-position bias read from CUDA tensors (gathers, on the fast
    paths' programs like the forward's), causal, 300 tokens, GQA."""
    B, H, Hkv, N = 2, 4, 2, 300
    gen = torch.Generator(device="cuda").manual_seed(D)
    doc = torch.zeros(B, N, dtype=torch.int32, device="cuda")
    doc[0, 120:] = 1
    doc[1, 40:] = 1
    doc[1, 250:] = 2
    rel = torch.randn(H, 2 * N - 1, device="cuda", generator=gen)

    def mask(b, h, q_idx, kv_idx):
        return doc[b, q_idx] == doc[b, kv_idx]

    def bias(s, b, h, q_idx, kv_idx):
        return s + rel[h, q_idx - kv_idx + N - 1]

    def rand(*s):
        return torch.randn(*s, device="cuda", generator=gen).to(dtype)
    q, k, v, do = rand(B, H, N, D), rand(B, Hkv, N, D), rand(B, Hkv, N, D), rand(B, H, N, D)
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    tessel.attention(*leaves, causal=True, score_mod=bias, mask_mod=mask,
                     enable_gqa=True).backward(do)
    qi = torch.arange(N, device="cuda")[:, None]
    ki = torch.arange(N, device="cuda")[None, :]
    seen = ((doc[:, :, None] == doc[:, None, :]) & (qi >= ki))[:, None]   # [B, 1, N, N]

    def score(s, qi_, ki_):
        s = s + rel[:, qi - ki + N - 1][None].to(s.dtype)
        return s.masked_fill(~seen, float("-inf"))

    def grads(dt_leaves, dout):
        reference(*dt_leaves, True, score).backward(dout)
        return [x.grad for x in dt_leaves]
    want = grads([x.double().requires_grad_() for x in (q, k, v)], do.double())
    low = grads([x.clone().requires_grad_() for x in (q, k, v)], do)
    assert_within_twice_torch([x.grad for x in leaves], want, low)


@pytest.mark.parametrize("use", ["lse", "both"])
def test_gradient_through_the_lse(use):
    """A loss of the LSE alone (do is None in the backward) or of O and the LSE (dlse folded
    into Δ), against float64 autograd."""
    B, H, N, D = 1, 2, 200, 64
    gen = torch.Generator(device="cuda").manual_seed(11 + len(use))

    def rand(*s):
        return torch.randn(*s, device="cuda", generator=gen)

    q, k, v = (rand(B, H, N, D).half() for _ in range(3))
    w, do = rand(B, H, N), rand(B, H, N, D)

    def loss(o, lse):
        return (lse * w).sum() + ((o.double() * do.double()).sum() if use == "both" else 0)

    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    o, lse = tessel.attention(*leaves, causal=True, return_lse=True)
    loss(o, lse.double()).backward()
    ref = [x.double().requires_grad_() for x in (q, k, v)]
    s = ref[0] @ ref[1].transpose(-1, -2) / math.sqrt(D)
    s = s.masked_fill(torch.ones(N, N, dtype=torch.bool, device="cuda").triu(1), float("-inf"))
    loss(torch.softmax(s, -1) @ ref[2], torch.logsumexp(s, -1)).backward()
    for name, got, want in zip(("dq", "dk", "dv"), leaves, ref):
        # A loss of the LSE alone does not reach v in the reference (grad None): dv is 0, as
        # from any op whose outputs include o (SDPA's too).
        expect = want.grad if want.grad is not None else torch.zeros_like(want)
        err = (got.grad.double() - expect).abs().max().item()
        assert err <= 1e-2 * max(1.0, expect.abs().max().item()), (name, err)


@pytest.mark.parametrize("knob", ["side-stream-dq", "keyrows-64x128", "keyrows-64x128-split",
                                  "keyrows-32x64", "dq-128x64"])
@pytest.mark.parametrize("D", [64, 128])
def test_backward_switches_keep_the_gradients(knob, D, monkeypatch):
    """The backward's switches change the schedule, not the sums: dQ on a side stream
    (backward.CONCURRENT_DQ) and other blocks for one program (FAST_KEYROWS_BLOCKS_SM90,
    FAST_DQ_BLOCKS_SM90; sm_90a only), also with dV and dK by two programs (SPLIT_KEYROWS),
    give the default's gradients (on the H200, 2026-12-03,
    bit for bit at 4k and 16k), here at lengths that end in a partial block, GQA."""
    import tessel.backward as tb
    gen = torch.Generator(device="cuda").manual_seed(D + len(knob))
    q = torch.randn(2, 4, 300, D, device="cuda", generator=gen).half()
    k, v = (torch.randn(2, 2, 333, D, device="cuda", generator=gen).half() for _ in range(2))
    do = torch.randn(2, 4, 300, D, device="cuda", generator=gen).half()
    o, lse = tessel.attention(q, k, v, causal=True, enable_gqa=True, return_lse=True)

    def grads():
        return tessel.attention_backward(q, k, v, o, lse, do, causal=True, enable_gqa=True)
    want = grads()
    if knob == "side-stream-dq":
        monkeypatch.setattr(tb, "CONCURRENT_DQ", True)
    elif knob == "keyrows-32x64":       # 32 query rows a step: no spill at d128 (ptxas)
        monkeypatch.setattr(tb, "FAST_KEYROWS_BLOCKS_SM90", {D: (32, 64)})
    elif knob.startswith("keyrows-64x128"):
        monkeypatch.setattr(tb, "FAST_KEYROWS_BLOCKS_SM90", {D: (64, 128)})
        if knob.endswith("split"):
            monkeypatch.setattr(tb, "SPLIT_KEYROWS", (D, 256))
    else:
        monkeypatch.setattr(tb, "FAST_DQ_BLOCKS_SM90", {D: (128, 64)})
    for name, got, ref in zip(("dq", "dk", "dv"), grads(), want):
        err = (got.float() - ref.float()).abs().max().item()
        assert err <= 1e-3 * max(1.0, ref.float().abs().max().item()), (knob, name, err)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("mod", [None, "alibi"])
def test_even_causal_keeps_the_gradients(dtype, D, mod, monkeypatch):
    """backward.EVEN_CAUSAL (off until measured): causal calls at whole blocks run the key-rows
    program without its bounds mask, all true there (the diagonal's causal mask stays): the
    default's gradients bit for bit; GQA."""
    import tessel.backward as tb
    gen = torch.Generator(device="cuda").manual_seed(D + 7)
    q, do = (torch.randn(2, 4, 512, D, device="cuda", generator=gen).to(dtype) for _ in range(2))
    k, v = (torch.randn(2, 2, 512, D, device="cuda", generator=gen).to(dtype) for _ in range(2))
    kw = dict(causal=True, enable_gqa=True, score_mod=alibi if mod else None)
    o, lse = tessel.attention(q, k, v, return_lse=True, **kw)
    want = tessel.attention_backward(q, k, v, o, lse, do, **kw)
    monkeypatch.setattr(tb, "EVEN_CAUSAL", True)
    got = tessel.attention_backward(q, k, v, o, lse, do, **kw)
    for name, g, w in zip(("dq", "dk", "dv"), got, want):
        assert torch.equal(g, w), name


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("D", [64, 128])
def test_fused_dq_matches_the_deterministic_backward(causal, dtype, D, monkeypatch):
    """backward.FUSED_DQ_DIMS (sm_90a): dQ added up in the key-rows program (float32 atomic
    adds) gives the dQ program's gradients within float32 rounding, and
    deterministic=True (the dQ program) is the same bit for bit from call to call; GQA,
    lengths ending in partial blocks, more keys than queries."""
    import tessel.backward as tb
    monkeypatch.setattr(tb, "FUSED_DQ_DIMS", (64, 128))
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    gen = torch.Generator(device="cuda").manual_seed(11 + causal)
    q = torch.randn(2, 4, 300, D, device="cuda", generator=gen).to(dt)
    k, v = (torch.randn(2, 2, 333, D, device="cuda", generator=gen).to(dt) for _ in range(2))
    do = torch.randn(2, 4, 300, D, device="cuda", generator=gen).to(dt)
    o, lse = tessel.attention(q, k, v, causal=causal, enable_gqa=True, return_lse=True)

    def grads(det):
        return tessel.attention_backward(q, k, v, o, lse, do, causal=causal, enable_gqa=True,
                                         deterministic=det)
    fused, det, det2 = grads(False), grads(True), grads(True)
    for name, a, b, b2 in zip(("dq", "dk", "dv"), fused, det, det2):
        assert torch.equal(b, b2), name
        err = (a.float() - b.float()).abs().max().item()
        assert err <= 1e-2 * max(1.0, b.float().abs().max().item()), (name, err)
