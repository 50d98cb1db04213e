"""Persistent attention kernels on CUDA tensors (grid.persistent_programs): the 128x128 and
d64's 192x128 sm_90a kernels launched on one program an SM, each walking its tiles. Checked
against float32 torch attention on fresh random inputs, and against the same call one program a
tile (the per-tile arithmetic is the same, so the outputs are too), with more tiles than SMs
(several tiles a program) and fewer; dense (causal and not, ragged lengths, GQA) and with block
masks.

Run on a machine with a GPU and torch (skipped elsewhere):
    TESSEL_CACHE_DIR=$(mktemp -d) PYTHONPATH=build/python python3 -m pytest -q test/gpu/test_persistent_gpu.py
"""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tessel  # noqa: E402
import importlib  # noqa: E402
from tessel import grid  # noqa: E402
from mask_cases import document_ids  # noqa: E402
attention_module = importlib.import_module("tessel.attention")   # the module, not the function

TOL = {torch.float16: 5e-3, torch.bfloat16: 2e-2}


@pytest.fixture
def persistent():
    """Runs the test's calls with persistent kernels on or off; restores the default."""
    def switch(on):
        grid.PERSISTENT_GPU = on
        attention_module._cuda_configs.clear()
    default = grid.PERSISTENT_GPU
    yield switch
    switch(default)


def reference(q, k, v, allowed=None, causal=False):
    q, k, v = q.float(), k.float(), v.float()
    k = k.repeat_interleave(q.shape[1] // k.shape[1], 1)
    v = v.repeat_interleave(q.shape[1] // v.shape[1], 1)
    s = torch.einsum("bhqd,bhkd->bhqk", q, k) / q.shape[-1] ** 0.5
    if causal:
        n = s.shape[-1]
        allowed = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
    if allowed is not None:
        s = s.masked_fill(~allowed, float("-inf"))
    return torch.softmax(s, dim=-1).nan_to_num(0.0) @ v


def hopper():
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("persistent kernels are the sm_90a 128x128 ones")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("B,H,Hkv,N", [(4, 16, 16, 2048), (2, 8, 2, 1000), (1, 3, 3, 4000),
                                       (3, 32, 8, 777)])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_dense(persistent, dtype, causal, B, H, Hkv, N, D):
    # d128: 128x128 (causal from 1024 keys); d64: 192x128 from 2048 queries and keys (three
    # consumer warpgroups; 4000 rows end in a tile of 160), else 64x128 one program a tile;
    # d256: 128x64, persistent when causal (grid.PERSISTENT_CAUSAL_BLOCKS).
    hopper()
    gen = torch.Generator(device="cuda").manual_seed(N + H + D)
    q = torch.randn(B, H, N, D, device="cuda", generator=gen).to(dtype)
    k, v = (torch.randn(B, Hkv, N, D, device="cuda", generator=gen).to(dtype) for _ in range(2))
    gqa = Hkv != H
    persistent(True)
    o, lse = tessel.attention(q, k, v, causal=causal, enable_gqa=gqa, return_lse=True)
    kernel = tessel.compile_attention(q, k, v, causal=causal, enable_gqa=gqa)
    persistent(False)
    o1, lse1 = tessel.attention(q, k, v, causal=causal, enable_gqa=gqa, return_lse=True)
    want = reference(q, k, v, causal=causal)
    assert (o.float() - want).abs().max().item() < TOL[dtype] * max(1.0, want.abs().max().item())
    torch.testing.assert_close(o, o1, atol=0, rtol=0)
    torch.testing.assert_close(lse, lse1, atol=0, rtol=0)
    persistent_expected = causal if D == 256 else N >= 2048 or (
        D == 128 and (not causal or N >= attention_module.CAUSAL_LONG_KEYS))
    assert kernel.name == ("persistent_attention_kernel" if persistent_expected
                           else "attention_kernel"), kernel.name


@pytest.mark.parametrize("N", [1024, 1500])
def test_short_causal_rows_take_the_persistent_128x128_kernel(N):
    # Since the thirty-eighth session d128 causal rows take 128x128 from 1024 keys
    # (attention.CAUSAL_LONG_KEYS; 64x64 below): against float32, GQA, both dtypes.
    hopper()
    for dtype in (torch.float16, torch.bfloat16):
        gen = torch.Generator(device="cuda").manual_seed(N)
        q = torch.randn(2, 8, N, 128, device="cuda", generator=gen).to(dtype)
        k, v = (torch.randn(2, 4, N, 128, device="cuda", generator=gen).to(dtype)
                for _ in range(2))
        o = tessel.attention(q, k, v, causal=True, enable_gqa=True)
        kernel = tessel.compile_attention(q, k, v, causal=True, enable_gqa=True)
        assert kernel.name == "persistent_attention_kernel", kernel.name
        want = reference(q, k, v, causal=True)
        assert (o.float() - want).abs().max().item() < \
            TOL[dtype] * max(1.0, want.abs().max().item())


@pytest.fixture
def general_keys(monkeypatch):
    """Runs the test's calls with the kernels of ragged key lengths (EVEN_N off) when called."""
    def switch():
        monkeypatch.setattr(attention_module, "EVEN_KEYS", False)
        attention_module._cuda_configs.clear()
    yield switch
    attention_module._cuda_configs.clear()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("B,H,Hkv,N", [(2, 16, 16, 1024), (1, 8, 2, 4096), (3, 4, 4, 128)])
@pytest.mark.parametrize("D", [64, 128, 256])
@pytest.mark.parametrize("mod", [None, "softcap"])
def test_even_keys(monkeypatch, general_keys, dtype, B, H, Hkv, N, D, mod):
    # Key lengths that are a multiple of the key block take kernels without the key-tail mask
    # (attention.even_keys: one key loop): bit for bit the general kernel's outputs, which
    # visit the same blocks in the same order, and float32 attention within tolerance. (d128's
    # 128x128 takes the last key block first by default: test_tail_block_first.)
    monkeypatch.setattr(attention_module, "TAIL_BLOCK_FIRST", False)
    attention_module._cuda_configs.clear()
    gen = torch.Generator(device="cuda").manual_seed(N + H + D)
    q = torch.randn(B, H, N, D, device="cuda", generator=gen).to(dtype)
    k, v = (torch.randn(B, Hkv, N, D, device="cuda", generator=gen).to(dtype) for _ in range(2))
    gqa = Hkv != H
    score_mod = None
    if mod == "softcap":
        def score_mod(score, b, h, q_idx, kv_idx):
            return 20.0 * tessel.language.tanh(score / 20.0)
    kernel = tessel.compile_attention(q, k, v, enable_gqa=gqa, score_mod=score_mod)
    blocks = {entry[0]: entry[3] for entry in kernel.specialization
              if entry[1] == "constexpr" and entry[0] in ("D", "BLOCK_M", "BLOCK_N")}
    expected = attention_module.even_keys_allowed(False, None)
    o, lse = tessel.attention(q, k, v, enable_gqa=gqa, score_mod=score_mod, return_lse=True)
    general_keys()          # EVEN_KEYS off from here: the general kernel
    o1, lse1 = tessel.attention(q, k, v, enable_gqa=gqa, score_mod=score_mod, return_lse=True)
    assert ("EVEN_N", "constexpr", "bool", expected) in kernel.specialization
    torch.testing.assert_close(o, o1, atol=0, rtol=0)
    torch.testing.assert_close(lse, lse1, atol=0, rtol=0)
    qf = q.float()
    kf, vf = (x.float().repeat_interleave(H // Hkv, 1) for x in (k, v))
    s = torch.einsum("bhqd,bhkd->bhqk", qf, kf) / D ** 0.5
    if mod == "softcap":
        s = 20.0 * torch.tanh(s / 20.0)
    want = torch.softmax(s, dim=-1) @ vf
    assert (o.float() - want).abs().max().item() < TOL[dtype] * max(1.0, want.abs().max().item())


def _block_first(monkeypatch, switch, causal, dtype, B, H, Hkv, Nq, Nk, mod, D=128,
                 blocks=None):
    """tessel.attention at head dim D (and `blocks`, else the default's) with attention's
    `switch` (DIAGONAL_BLOCK_FIRST or TAIL_BLOCK_FIRST) off, then on: against float32
    attention, and the kernel without it within the same tolerance (the blocks' order differs,
    so the bits may); a second call with it on (the lean path) bit for bit the first. Returns
    the kernel compiled with it on."""
    hopper()
    gen = torch.Generator(device="cuda").manual_seed(Nq + Nk + H)
    q = torch.randn(B, H, Nq, D, device="cuda", generator=gen).to(dtype)
    k, v = (torch.randn(B, Hkv, Nk, D, device="cuda", generator=gen).to(dtype)
            for _ in range(2))
    score_mod = None
    if mod == "softcap":
        def score_mod(score, b, h, q_idx, kv_idx):
            return 20.0 * tessel.language.tanh(score / 20.0)
    args = dict(causal=causal, enable_gqa=Hkv != H, score_mod=score_mod)
    if blocks:
        args.update(block_m=blocks[0], block_n=blocks[1])
    monkeypatch.setattr(attention_module, switch, False)
    attention_module._cuda_configs.clear()
    default = tessel.attention(q, k, v, **args)
    monkeypatch.setattr(attention_module, switch, True)
    attention_module._cuda_configs.clear()
    kernel = tessel.compile_attention(q, k, v, **args)
    o = tessel.attention(q, k, v, **args)
    torch.testing.assert_close(o, tessel.attention(q, k, v, **args), atol=0, rtol=0)
    attention_module._cuda_configs.clear()
    qf = q.float()
    kf, vf = (x.float().repeat_interleave(H // Hkv, 1) for x in (k, v))
    s = torch.einsum("bhqd,bhkd->bhqk", qf, kf) / D ** 0.5
    if mod == "softcap":
        s = 20.0 * torch.tanh(s / 20.0)
    if causal:
        allowed = torch.ones(Nq, Nk, dtype=torch.bool, device="cuda").tril()
        s = s.masked_fill(~allowed, float("-inf"))
    want = torch.softmax(s, -1).nan_to_num(0.0) @ vf
    tol = TOL[dtype] * max(1.0, want.abs().max().item())
    assert (o.float() - want).abs().max().item() < tol
    assert (o.float() - default.float()).abs().max().item() < tol
    return kernel


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("B,H,Hkv,Nq,Nk", [(2, 16, 16, 2048, 2048), (1, 8, 2, 4000, 4000),
                                           (1, 4, 4, 2100, 4096), (2, 4, 4, 4096, 2048)])
@pytest.mark.parametrize("mod", [None, "softcap"])
def test_diagonal_block_first(monkeypatch, dtype, B, H, Hkv, Nq, Nk, mod):
    # attention.DIAGONAL_BLOCK_FIRST: d128 causal rows at 128x128 run their diagonal block
    # first, as the overlapped consumers' peel (Nq > Nk: the general kernel).
    kernel = _block_first(monkeypatch, "DIAGONAL_BLOCK_FIRST", True, dtype, B, H, Hkv, Nq, Nk,
                          mod)
    assert ("DIAGONAL_FIRST", "constexpr", "bool", Nq <= Nk) in kernel.specialization


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("B,H,Hkv,Nq,Nk", [(2, 16, 16, 4096, 4096), (1, 8, 2, 4000, 4000),
                                           (1, 4, 4, 2100, 4096)])
def test_diagonal_block_first_d64(monkeypatch, dtype, B, H, Hkv, Nq, Nk):
    # d64 at 128x128 (block_m=/block_n=; attention.PEELED_BLOCKS): the diagonal block first,
    # the candidate beside the default 192x128 for d64 4k causal.
    kernel = _block_first(monkeypatch, "DIAGONAL_BLOCK_FIRST", True, dtype, B, H, Hkv, Nq, Nk,
                          None, D=64, blocks=(128, 128))
    assert ("DIAGONAL_FIRST", "constexpr", "bool", True) in kernel.specialization


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("D,B,H,Hkv,Nq,Nk", [(64, 4, 8, 8, 4096, 4096), (64, 1, 8, 2, 4000, 4000),
                                             (64, 2, 4, 4, 2100, 4096), (64, 2, 4, 4, 5000, 3000),
                                             (64, 3, 4, 4, 1000, 1000), (256, 1, 8, 2, 4000, 4000),
                                             (128, 2, 8, 8, 1000, 1000)])
def test_align_query_blocks_to_end(monkeypatch, dtype, D, B, H, Hkv, Nq, Nk):
    # attention.ALIGN_QUERY_BLOCKS_TO_END: causal query blocks end at the last row (the block
    # cut short first, seeing the fewest keys: d64's 192-row blocks at 4096 rows); rows before
    # 0 neither read nor written (several heads: a write there would land in another head).
    # Taken here wherever a block is cut short, whether or not causal_block_cost would.
    monkeypatch.setattr(attention_module, "causal_block_cost",
                        lambda nq, nk, m, n, aligned: -aligned)
    kernel = _block_first(monkeypatch, "ALIGN_QUERY_BLOCKS_TO_END", True, dtype, B, H, Hkv, Nq,
                          Nk, None, D=D)
    bm = next(x[3] for x in kernel.specialization if x[0] == "BLOCK_M")
    assert ("ALIGN_END", "constexpr", "bool", Nq % bm != 0) in kernel.specialization


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("B,H,Hkv,Nq,Nk", [(2, 16, 16, 1000, 1000), (1, 8, 2, 4000, 4000),
                                           (2, 4, 4, 4096, 4096), (1, 4, 4, 300, 2100),
                                           (3, 4, 4, 2048, 77)])
@pytest.mark.parametrize("mod", [None, "softcap"])
def test_tail_block_first(monkeypatch, dtype, B, H, Hkv, Nq, Nk, mod):
    # attention.TAIL_BLOCK_FIRST: d128 non-causal rows at 128x128 run their last key block
    # first, masked at the key tail, as the overlapped consumers' peel, at every key length
    # (the kernel without it: EVEN_N or the split).
    kernel = _block_first(monkeypatch, "TAIL_BLOCK_FIRST", False, dtype, B, H, Hkv, Nq, Nk, mod)
    assert ("TAIL_FIRST", "constexpr", "bool", True) in kernel.specialization


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("case", ["document", "window"])
@pytest.mark.parametrize("N", [2048, 3000])
def test_block_mask(persistent, dtype, case, N):
    hopper()
    B, H = 3, 8
    gen = torch.Generator(device="cuda").manual_seed(N)
    doc = document_ids(torch, B, N, gen)

    def document(b, h, q_idx, kv_idx):
        return (doc[b, q_idx] == doc[b, kv_idx]) & (q_idx >= kv_idx)

    def window(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (q_idx - kv_idx < 500)

    mask = document if case == "document" else window
    bB = B if case == "document" else None
    bm = tessel.block_mask(mask, bB, None, N, N, device="cuda")
    q, k, v = (torch.randn(B, H, N, 128, device="cuda", generator=gen).to(dtype) for _ in range(3))
    persistent(True)
    o, lse = tessel.attention(q, k, v, mask_mod=mask, block_mask=bm, return_lse=True)
    persistent(False)
    o1, lse1 = tessel.attention(q, k, v, mask_mod=mask, block_mask=bm, return_lse=True)
    qi = torch.arange(N, device="cuda")[:, None]
    ki = torch.arange(N, device="cuda")[None, :]
    if case == "document":
        allowed = ((doc[:, :, None] == doc[:, None, :]) & (qi >= ki))[:, None]
    else:
        allowed = (qi >= ki) & (qi - ki < 500)
    want = reference(q, k, v, allowed)
    assert (o.float() - want).abs().max().item() < TOL[dtype] * max(1.0, want.abs().max().item())
    torch.testing.assert_close(o, o1, atol=0, rtol=0)
    torch.testing.assert_close(lse, lse1, atol=0, rtol=0)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [64, 128])
def test_one_warpgroup_blocks(causal, D):
    # A persistent kernel at 64x64 (one consumer warpgroup, pipelined copies, Q in the ring's
    # last stage): not a default, but what a user's own persistent kernel compiles to.
    hopper()
    import numpy as np
    from tessel.attention import attention_kernel, persistent_attention_kernel
    B, H, N = 2, 8, 1000
    gen = torch.Generator(device="cuda").manual_seed(D)
    q, k, v = (torch.randn(B, H, N, D, device="cuda", generator=gen).half() for _ in range(3))
    nb = -(-N // 64)
    cx = dict(D=D, BLOCK_M=64, BLOCK_N=64, CAUSAL=causal, SCORE_MOD=None, MASK_MOD=None)
    outs = []
    for persistent in (True, False):
        o = torch.empty_like(q)
        lse = torch.empty(B, H, N, device="cuda")
        args = (q, k, v, o, lse, N, N, H, H, D ** -0.5)
        if persistent:
            costs = np.tile(np.arange(nb, 0, -1) if causal else np.ones(nb), B * H)
            tiles, starts = (torch.from_numpy(x).cuda() for x in grid.greedy_schedule(costs, 7))
            persistent_attention_kernel[(7, 1, 1)](*args, B * H, tiles, starts, **cx)
        else:
            attention_kernel[(nb, B * H, 1)](*args, **cx)
        outs.append((o, lse))
    want = reference(q, k, v, causal=causal)
    o = outs[0][0]
    assert (o.float() - want).abs().max().item() < 5e-3 * max(1.0, want.abs().max().item())
    torch.testing.assert_close(outs[0][0], outs[1][0], atol=0, rtol=0)
    torch.testing.assert_close(outs[0][1], outs[1][1], atol=0, rtol=0)


def _launch_with(kernel, grid_, args, constexprs, **options):
    """kernel (a @tessel.jit function) compiled with GpuOptions(**options) and launched."""
    from tessel import cache, gpu
    compiled = kernel.warmup(*args, **constexprs)
    launcher = compiled.gpu_launcher(args[0].get_device(),
                                     cache.GpuOptions(chip="sm_90a", **options))
    launcher.launch(grid_, gpu.stream_source(), *args)


# The producer's schedules other than the default, each the same arithmetic, so the same bits:
# Q copied by the producer (producer_once, tilegpu-producer-once), the producer's copies by
# cp.async instead of TMA with tensor maps built in the kernel (tma_producer=False; TMA is the
# default since 2026-12-04), and both; with Q from the producer, each tile's first S issued
# at the end of the tile before (pipeline_tiles, tilegpu-pipeline-tiles; off by default); O's
# rescale made beside the next S's wgmma (rescale_under_s, tilegpu-overlap-consumers; off by
# default); the consumers' dots synchronous (overlap_consumers=False: FP8's default, and the
# spill fallbacks' last step; at 4096 keys the one-loop kernel that ptxas 13.0 once gave Q's
# registers to P in).
SCHEDULES = {"once": dict(producer_once=True), "cp.async": dict(tma_producer=False),
             "once+cp.async": dict(producer_once=True, tma_producer=False),
             "once+pipeline": dict(producer_once=True, pipeline_tiles=True),
             "fused": dict(fuse_masked_loops=True),
             "overlapped-masked": dict(sync_masked_loops=False),
             "rescale-under-s": dict(rescale_under_s=True),
             "once+rescale-under-s": dict(producer_once=True, rescale_under_s=True),
             "synchronous": dict(overlap_consumers=False),
             "once+synchronous": dict(producer_once=True, overlap_consumers=False)}


def assert_schedule_output(o, lse, want, want_lse, options):
    """A schedule's output against the default's: its bits, but where the schedule rounds
    otherwise — the overlap's O rescale (late_p), pipelined tiles, which measured 1-ulp
    differences on ~0.03 % of O and of the LSE on the H200 (2026-12-05, cause not found yet),
    one key loop for the masked and unmasked copies (fuse_masked_loops: the overlapped
    pipeline no longer drains between them), the masked copy overlapped as it was by
    default before 2026-12-05 (sync_masked_loops=False: O's rescale and P·V in another order)
    and synchronous consumers (overlap_consumers=False: the same) — within a few fp16 ulps of
    O and a few f32 ulps of the LSE."""
    exact = not (options.get("late_p") or options.get("pipeline_tiles")
                 or options.get("fuse_masked_loops") or options.get("sync_masked_loops") is False
                 or options.get("overlap_consumers") is False)
    torch.testing.assert_close(o, want, atol=0 if exact else 1e-3, rtol=0 if exact else 4e-3)
    torch.testing.assert_close(lse, want_lse, atol=0 if exact else 1e-5,
                               rtol=0 if exact else 1e-6)


@pytest.mark.parametrize("schedule", list(SCHEDULES))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("N", [2500, 4096])
def test_producer_schedules_dense(persistent, schedule, causal, N):
    # Lengths where causal runs 128x128 blocks too (CAUSAL_LONG), so that both kernels are
    # persistent; 2500 ends in a partial block (TMA's zero fill past the descriptor's rows).
    hopper()
    from tessel.attention import _prepare_cuda, persistent_attention_kernel
    persistent(True)
    B, H = 4, 16
    gen = torch.Generator(device="cuda").manual_seed(N)
    q, k, v = (torch.randn(B, H, N, 128, device="cuda", generator=gen).half() for _ in range(3))
    want, want_lse = tessel.attention(q, k, v, causal=causal, return_lse=True)
    args, cx, grid_, o, lse, _ = _prepare_cuda(q, k, v, causal, None, None, None, False, None, None)
    assert len(args) == 13, "the persistent kernel"
    _launch_with(persistent_attention_kernel, grid_, args, cx, **SCHEDULES[schedule])
    assert_schedule_output(o, lse, want, want_lse, SCHEDULES[schedule])
    torch.testing.assert_close(o.float(), reference(q, k, v, causal=causal), atol=TOL[q.dtype],
                               rtol=0)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D,N", [(128, 1000), (256, 1000), (256, 4096), (256, 2500)])
def test_rescale_under_s(causal, D, N):
    # GpuOptions.rescale_under_s at the kernels test_producer_schedules_dense does not reach:
    # d256 (128x64; persistent where causal) and short or ragged d128. The same products of
    # the same values as the default, made elsewhere: the default's bits.
    hopper()
    from tessel.attention import _prepare_cuda, attention_kernel, persistent_attention_kernel
    B, H = 2, 2048 // D
    gen = torch.Generator(device="cuda").manual_seed(D + N)
    q, k, v = (torch.randn(B, H, N, D, device="cuda", generator=gen).half() for _ in range(3))
    want, want_lse = tessel.attention(q, k, v, causal=causal, return_lse=True)
    args, cx, grid_, o, lse, _ = _prepare_cuda(q, k, v, causal, None, None, None, False, None, None)
    kernel = persistent_attention_kernel if len(args) == 13 else attention_kernel
    _launch_with(kernel, grid_, args, cx, rescale_under_s=True)
    assert_schedule_output(o, lse, want, want_lse, dict(rescale_under_s=True))
    torch.testing.assert_close(o.float(), reference(q, k, v, causal=causal), atol=TOL[q.dtype],
                               rtol=0)


# d64's 192x128 kernel (three consumer warpgroups, persistent from 2k queries and keys) under
# the schedules that are not its default: each tile's first S issued at the end of the tile
# before (pipeline_tiles, which needs Q from the producer; the pass peels the synchronous
# consumers' first loop) — the same arithmetic, so the default's bits — and its consumers
# overlapped with P made after the previous P·V's wait at 160 registers beside a cp.async
# producer (late_p; a TMA producer keeps its registers, so tma_producer=False), and both. The
# overlap rescales O after adding the previous P·V where the synchronous loop rescales before
# adding this one: the same sums, rounded otherwise, so O within a few fp16 ulps of the
# default's (the LSE's arithmetic is unchanged: its bits); late-p with that rescale made beside
# the next S (rescale_under_s: late-p's own bits).
D64_SCHEDULES = {"once+pipeline": dict(producer_once=True, pipeline_tiles=True),
                 "late-p": dict(late_p=True, tma_producer=False),
                 "late-p+once+pipeline": dict(late_p=True, tma_producer=False,
                                              producer_once=True, pipeline_tiles=True),
                 "late-p+rescale-under-s": dict(late_p=True, tma_producer=False,
                                                rescale_under_s=True),
                 "fused": dict(fuse_masked_loops=True),
                 "skip-masked": dict(skip_masked_warpgroups=True)}


@pytest.mark.parametrize("schedule", list(D64_SCHEDULES))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("N", [2048, 2500, 4096])
def test_d64_schedules(persistent, schedule, causal, N):
    # 2500 ends in a partial block; causal tiles of the first query block have no unmasked
    # loop (no pipelined S: the masked loop issues its own).
    hopper()
    from tessel.attention import _prepare_cuda, persistent_attention_kernel
    persistent(True)
    B, H = 4, 32
    gen = torch.Generator(device="cuda").manual_seed(N + causal)
    q, k, v = (torch.randn(B, H, N, 64, device="cuda", generator=gen).half() for _ in range(3))
    want, want_lse = tessel.attention(q, k, v, causal=causal, return_lse=True)
    args, cx, grid_, o, lse, _ = _prepare_cuda(q, k, v, causal, None, None, None, False, None, None)
    assert len(args) == 13 and cx["BLOCK_M"] == 192, "the 192-row persistent kernel"
    _launch_with(persistent_attention_kernel, grid_, args, cx, **D64_SCHEDULES[schedule])
    assert_schedule_output(o, lse, want, want_lse, D64_SCHEDULES[schedule])
    torch.testing.assert_close(o.float(), reference(q, k, v, causal=causal), atol=TOL[q.dtype],
                               rtol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("D,Nq,Nk,H,Hkv", [(64, 4096, 4096, 8, 8), (64, 4000, 4000, 8, 2),
                                           (64, 1500, 3000, 4, 4), (64, 3000, 1700, 4, 4),
                                           (128, 2500, 2500, 4, 4), (128, 1000, 3000, 4, 2),
                                           (256, 4000, 4000, 2, 2), (256, 700, 2000, 2, 2)])
def test_skip_masked_warpgroups(dtype, D, Nq, Nk, H, Hkv):
    # GpuOptions.skip_masked_warpgroups (tilegpu-skip-masked-warpgroups): in the masked loop a
    # consumer warpgroup branches around the blocks its own 64 rows cannot see. Causal (top
    # left, as SDPA's, where Nq != Nk; rows shifted by ALIGN_END where the cost model takes
    # it), d64's 192-row blocks (three warpgroups), d128 and d256 (two, with the turns of the
    # ping-pong; d256 gives the switch up where ptxas spills), GQA. A skipped step changes
    # nothing (its scores are all -inf), so the default's bits; and the float32 reference.
    hopper()
    from tessel.attention import _prepare_cuda, attention_kernel, persistent_attention_kernel
    B = 2
    gen = torch.Generator(device="cuda").manual_seed(D + Nq + Nk)
    q = torch.randn(B, H, Nq, D, device="cuda", generator=gen).to(dtype)
    k, v = (torch.randn(B, Hkv, Nk, D, device="cuda", generator=gen).to(dtype) for _ in range(2))
    want, want_lse = tessel.attention(q, k, v, causal=True, enable_gqa=True, return_lse=True)
    args, cx, grid_, o, lse, _ = _prepare_cuda(q, k, v, True, None, None, None, True, None, None)
    kernel = persistent_attention_kernel if len(args) == 13 else attention_kernel
    _launch_with(kernel, grid_, args, cx, skip_masked_warpgroups=True)
    torch.testing.assert_close(o, want, atol=0, rtol=0)
    torch.testing.assert_close(lse, want_lse, atol=0, rtol=0)
    allowed = torch.ones(Nq, Nk, dtype=torch.bool, device="cuda").tril()
    torch.testing.assert_close(o.float(), reference(q, k, v, allowed), atol=TOL[dtype], rtol=0)


@pytest.mark.parametrize("layout", ["bhnd", "bnhd"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("D", [64, 128])
def test_tma_producer_layouts_and_gqa(persistent, layout, dtype, D):
    # TMA maps (the default) of [B, N, H, D] views read in place (row stride H·D) and of GQA's
    # shared K/V heads, bf16's element type code; against the cp.async producer bit for bit and
    # a float32 reference. d64 at 2999 keys: the 192x128 kernel.
    hopper()
    from tessel.attention import _prepare_cuda, persistent_attention_kernel
    persistent(True)
    B, H, Hkv, N = 2, 8, 2, 1999 if D == 128 else 2999
    gen = torch.Generator(device="cuda").manual_seed(7)

    def make(h):
        x = torch.randn(B, N, h, D, device="cuda", generator=gen).to(dtype)
        return x.transpose(1, 2) if layout == "bnhd" else x.transpose(1, 2).contiguous()
    q, k, v = make(H), make(Hkv), make(Hkv)
    want, want_lse = tessel.attention(q, k, v, enable_gqa=True, return_lse=True)
    args, cx, grid_, o, lse, _ = _prepare_cuda(q, k, v, False, None, None, None, True, None, None)
    assert len(args) == 13, "the persistent kernel"
    _launch_with(persistent_attention_kernel, grid_, args, cx, tma_producer=False)
    torch.testing.assert_close(o, want, atol=0, rtol=0)
    torch.testing.assert_close(lse, want_lse, atol=0, rtol=0)
    torch.testing.assert_close(o.float(), reference(q, k, v), atol=TOL[dtype], rtol=0)


@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_producer_schedules_block_mask(persistent, schedule):
    # A mask without captured tensors (launched here without the jit's capture plumbing).
    hopper()
    from tessel import blocksparse
    persistent(True)
    B, H, N = 4, 16, 4096

    def window(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (q_idx - kv_idx < 700)

    bm = tessel.block_mask(window, None, None, N, N, device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(3)
    q, k, v = (torch.randn(B, H, N, 128, device="cuda", generator=gen).half() for _ in range(3))
    want, want_lse = tessel.attention(q, k, v, mask_mod=window, block_mask=bm, return_lse=True)
    args, cx, grid_, o, lse = blocksparse.prepare(q, k, v, None, None, window, False, bm, None,
                                                  None, False)
    assert cx["PERSISTENT"]
    _launch_with(blocksparse.block_sparse_attention_kernel, grid_, args, cx, **SCHEDULES[schedule])
    assert_schedule_output(o, lse, want, want_lse, SCHEDULES[schedule])


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("scale", [0.09, -0.05, 0.0, 2.0 ** -70, 3.0],
                         ids=["moderate", "negative", "zero", "tiny", "large"])
def test_scale_ranges(persistent, causal, scale):
    """A moderate scale runs the kernel specialised on it (no branch on the scale), the others
    the generic one (runtime.float_range): both against float32 torch attention."""
    hopper()
    gen = torch.Generator(device="cuda").manual_seed(17)
    q, k, v = (torch.randn(2, 4, 2048, 128, device="cuda", generator=gen).half()
               for _ in range(3))
    persistent(True)
    o = tessel.attention(q, k, v, causal=causal, scale=scale)
    s = torch.einsum("bhqd,bhkd->bhqk", q.float(), k.float()) * scale
    if causal:
        s = s.masked_fill(~torch.ones(2048, 2048, dtype=torch.bool, device="cuda").tril(),
                          float("-inf"))
    want = torch.softmax(s, dim=-1) @ v.float()
    assert (o.float() - want).abs().max().item() < TOL[torch.float16] * max(1.0, want.abs().max())
