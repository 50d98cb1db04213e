"""attention_varlen's gradients (python/tessel/varlen_backward.py) on torch CPU tensors, on the
interpreter, against float64 torch autograd run one sequence at a time: causal and not, GQA,
empty sequences, rows past the last sequence, sequences with more queries than keys, window,
soft cap and ALiBi, a loss on the LSE alone, bf16, seqused_k."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dsl_helpers  # noqa: F401,E402 (puts the build's package on the path)
import tessel  # noqa: E402

H, HKV, D = 4, 2, 32


def _packed(lq, lk, dtype=torch.float32, extra=(3, 2), seed=0, Ev=D):
    g = torch.Generator().manual_seed(seed)
    make = lambda n, h, d=D: torch.randn(n, h, d, generator=g,  # noqa: E731
                                         dtype=torch.float64).to(dtype)
    q = make(sum(lq) + extra[0], H).requires_grad_()
    k, v = (make(sum(lk) + extra[1], HKV, d).requires_grad_() for d in (D, Ev))
    cu = lambda ls: torch.tensor(np.cumsum([0] + ls), dtype=torch.int32)  # noqa: E731
    return q, k, v, cu(lq), cu(lk)


def _reference(q, k, v, cq, ck, causal, window=None, softcap=None, slopes=None, used=None):
    """float64 o and lse per sequence (bottom-right aligned), rows outside sequences 0 / 0;
    used: seqused_k (the first that many keys of each span)."""
    o = torch.zeros(q.shape[:2] + v.shape[2:], dtype=torch.float64)
    lse = torch.zeros(q.shape[1], q.shape[0], dtype=torch.float64)
    for b in range(len(cq) - 1):
        k_end = int(ck[b + 1]) if used is None else int(ck[b]) + int(used[b])
        qs, ks = slice(int(cq[b]), int(cq[b + 1])), slice(int(ck[b]), k_end)
        Q = q[qs].transpose(0, 1)
        K, V = (x[ks].transpose(0, 1).repeat_interleave(H // HKV, 0) for x in (k, v))
        nq, nk = Q.shape[1], K.shape[1]
        if nq == 0:
            continue
        s = Q @ K.transpose(-1, -2) / D ** 0.5
        i, j = torch.arange(nq)[:, None] + nk - nq, torch.arange(nk)[None, :]
        if softcap:
            s = softcap * torch.tanh(s / softcap)
        if slopes is not None:
            sl = slopes[b] if slopes.dim() == 2 else slopes
            s = s - sl.double()[:, None, None] * (i - j).abs()
        keep = torch.ones(nq, nk, dtype=torch.bool)
        if causal:
            keep &= i >= j
        if window is not None:
            keep &= (j >= i - window[0]) & (j <= i + window[1])
        s = s.masked_fill(~keep, float("-inf"))
        seen = keep.any(-1)
        lse_b = torch.logsumexp(s, -1)
        p = torch.where(seen[:, None], torch.softmax(torch.where(seen[:, None], s, 0.0), -1),
                        0.0)
        o[qs] = (p @ V).transpose(0, 1)
        lse[:, qs] = torch.where(seen, lse_b, 0.0)
    return o, lse


@pytest.mark.parametrize("causal", [False, True])
def test_gradients_of_packed_sequences(causal):
    # An empty sequence, one with more queries than keys (rows that see no key when causal),
    # GQA, and rows past the last sequence in q, k and v.
    _run([5, 17, 0, 30, 6], [9, 17, 4, 25, 3], causal)


@pytest.mark.parametrize("flash", [dict(window_size=(6, 0), softcap=5.0),
                                   dict(alibi_slopes="per-head"),
                                   dict(alibi_slopes="per-sequence", window_size=(3, 2))],
                         ids=["window+cap", "alibi[H]", "alibi[B,H]+window"])
def test_gradients_with_flash_arguments(flash):
    _run([5, 17, 30], [9, 17, 25], True, **flash)


@pytest.mark.parametrize("flash", [dict(), dict(window_size=(6, 0), softcap=5.0),
                                   dict(alibi_slopes="per-sequence")],
                         ids=["plain", "window+cap", "alibi[B,H]"])
def test_the_dense_route_too(monkeypatch, flash):
    # The route CUDA calls take where the varlen programs do not (sm_80, window/cap/ALiBi until
    # their GPU check, v of its own head dim): the dense backward over the packed rows.
    from tessel import varlen_backward as vb
    monkeypatch.setattr(vb, "_native_backward", lambda *a: None)
    _run([5, 17, 0, 30], [9, 17, 4, 25], True, **flash)


def test_gradient_of_the_lse_alone():
    _run([12, 20], [12, 33], False, lse_only=True)


def test_bf16_gradients():
    _run([16, 40], [16, 40], True, dtype=torch.bfloat16, tol=0.05)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("route", ["programs", "dense"])
def test_seqused_k_gradients(causal, route, monkeypatch):
    # FlashAttention-3's seqused_k: the keys past each sequence's count (in its span) are not
    # attended and get zero gradients, on the varlen programs and the dense route; causal
    # aligned to the counts; a count of 0, one of the whole span, an empty sequence.
    if route == "dense":
        from tessel import varlen_backward as vb
        monkeypatch.setattr(vb, "_native_backward", lambda *a: None)
    _run([5, 17, 0, 30, 6], [9, 20, 4, 33, 3], causal, used=[7, 20, 2, 0, 3])


def _run(lq, lk, causal, dtype=torch.float32, tol=5e-5, lse_only=False, Ev=D, used=None,
         **flash):
    if flash.get("alibi_slopes") == "per-head":
        flash["alibi_slopes"] = torch.tensor([0.3, 0.2, 0.1, 0.05])
    elif flash.get("alibi_slopes") == "per-sequence":
        flash["alibi_slopes"] = torch.rand(len(lq), H, generator=torch.Generator().manual_seed(3))
    q, k, v, cq, ck = _packed(lq, lk, dtype, Ev=Ev)
    seqused = None if used is None else torch.tensor(used, dtype=torch.int32)
    o, lse = tessel.attention_varlen(q, k, v, cq, ck, max(lq), max(lk), causal=causal,
                                     return_lse=True, seqused_k=seqused, **flash)
    assert o.grad_fn is not None and lse.grad_fn is not None
    g = torch.Generator().manual_seed(9)
    go = torch.randn(o.shape, generator=g, dtype=torch.float64)
    gl = torch.randn(lse.shape, generator=g, dtype=torch.float64)
    n = sum(lq)
    go[n:], gl[:, n:] = 0, 0
    refs = [x.detach().double().requires_grad_() for x in (q, k, v)]
    ro, rl = _reference(*refs, cq, ck, causal, flash.get("window_size"), flash.get("softcap"),
                        flash.get("alibi_slopes"), used)
    seen = torch.isfinite(lse.detach()).double()
    loss = (torch.nan_to_num(lse.double(), neginf=0.0) * seen * gl).sum()
    want = (rl * seen * gl).sum()
    if not lse_only:
        loss, want = loss + (o.double() * go).sum(), want + (ro * go).sum()
    loss.backward()
    want.backward()
    for got, ref in zip((q, k, v), refs):
        assert got.grad.dtype == dtype and got.grad.shape == got.shape
        want_grad = torch.zeros_like(ref) if ref.grad is None else ref.grad  # lse: no v
        scale = max(1.0, float(want_grad.abs().max()))
        err = float((got.grad.double() - want_grad).abs().max())
        assert err <= tol * scale, err
    # Rows past the last sequence get no gradient.
    assert not q.grad[n:].any() and not k.grad[sum(lk):].any()


@pytest.mark.parametrize("causal,window", [(False, None), (True, None), (True, (20, 0)),
                                           (False, (9, 30))])
def test_packed_block_mask_agrees_with_the_mask(causal, window):
    # The block mask made by interval arithmetic against tessel.block_mask's evaluation of the
    # same mask_mod at every pair: never full where a pair is hidden or a key is padding, never
    # empty where a pair is allowed (a block it calls partial only costs the mask's
    # arithmetic, as at a block that straddles two sequences); the same classes where the
    # sequences fill whole blocks.
    from tessel import varlen_backward as vb
    rng = np.random.default_rng(len(str(window)) + causal)
    for aligned in (False, False, False, True):
        lq = list(rng.integers(0, 90, 6) // (32 if aligned else 1) * (32 if aligned else 1))
        lk = lq if aligned else [n + int(rng.integers(0, 30)) for n in lq]
        cq, ck = (torch.tensor(np.cumsum([0] + ls), dtype=torch.int32) for ls in (lq, lk))
        nq, nk = sum(lq), sum(lk)
        tables = vb._row_tables(cq, ck, nq, nk)
        _, mask = vb.packed_mods(tables, causal, window, None, None)
        mine = vb.packed_block_mask(mask, tables, nq, nk, causal, window, 32)
        exact = tessel.block_mask(mask, None, None, nq, nk, BLOCK_M=32, BLOCK_N=32)

        def kinds(bm):
            out = np.zeros((-(-nq // 32), -(-nk // 32)), int)       # 0 empty, 1 part, 2 full
            for kind, num, idx in ((1, bm.kv_num_blocks, bm.kv_indices),
                                   (2, bm.full_kv_num_blocks, bm.full_kv_indices)):
                for qb in range(out.shape[0]):
                    out[qb, idx[0, 0, qb, :num[0, 0, qb]]] = kind
            return out
        got, want = kinds(mine), kinds(exact)
        assert not ((got == 2) & (want != 2)).any() and not ((got == 0) & (want != 0)).any()
        assert not aligned or window is not None or (got == want).all()


def test_the_fast_configuration_takes_the_forward_mods():
    # The CUDA route of the varlen programs hands serving._position_mods' mods (made for the
    # kernel already) to the fast backward's configuration; an H100 run found them refused
    # ("score_mod must be a function, got ModFunction").
    from tessel import backward, serving
    mods = serving._position_mods("attention_varlen", True, (8, 0), 5.0)
    x = np.zeros((1, 2, 16, 32), np.float16)
    _, _, cx = backward._config(x, x, x, True, None, mods["SCORE_MOD"], mods["MASK_MOD"], False,
                                16, 16)
    assert cx["SCORE_MOD"] is mods["SCORE_MOD"] and cx["MASK_MOD"] is mods["MASK_MOD"]


@pytest.mark.parametrize("causal", [False, True])
def test_compact_grid_gradients(causal, monkeypatch):
    # A long sequence beside short and empty ones: the dQ and dK/dV programs on the compact
    # grid (TILES: the batch's blocks, causal dQ from the last program) give the full grid's
    # gradients bit for bit, and the float64 reference's.
    from tessel import varlen_backward as vb
    lq, lk = [70, 3, 0, 17, 1, 9], [90, 2, 5, 17, 33, 1]
    grids, grid = [], vb._grid
    monkeypatch.setattr(vb, "_grid", lambda *a: grids.append(grid(*a)) or grids[-1])
    got = []
    for on in (True, False):
        monkeypatch.setattr(vb, "TILES", on)
        q, k, v, cq, ck = _packed(lq, lk, seed=5)
        o = tessel.attention_varlen(q, k, v, cq, ck, max(lq), max(lk), causal=causal)
        o.backward(torch.ones_like(o))
        got.append((q.grad, k.grad, v.grad))
    # dQ over 16-row query blocks, dK/dV over 16-row key blocks (q and k have 3 and 2 rows
    # past the last sequence): total // 16 + B programs a head, then B x the longest's.
    assert [(g[0], bool(g[2])) for g in grids] == [
        (((sum(lq) + 3) // 16 + 6, H, 1), True), (((sum(lk) + 2) // 16 + 6, H, 1), True),
        ((5, 6 * H, 1), False), ((6, 6 * H, 1), False)], grids
    for a, b in zip(*got):
        assert torch.equal(a, b)
    _run(lq, lk, causal)


@pytest.mark.parametrize("causal", [False, True])
def test_value_head_dim_of_its_own(causal, monkeypatch):
    # v narrower than q (MLA on packed sequences): the varlen kernel's DV forward and the varlen
    # programs at v's width (varlen_backward.VALUE_HEAD_DIM), GQA, an empty sequence, rows past
    # the last; the dense route; then the same call with it off (v padded for the whole call).
    from tessel import serving
    from tessel import varlen_backward as vb
    padded = serving.call_with_value_head_dim
    monkeypatch.setattr(serving, "call_with_value_head_dim",
                        lambda *a, **kw: pytest.fail("padded"))
    block_mask = vb.packed_block_mask
    monkeypatch.setattr(vb, "packed_block_mask", lambda *a, **kw: pytest.fail("dense route"))
    _run([5, 17, 0, 30, 6], [9, 17, 4, 25, 3], causal, Ev=16)
    _run([5, 17, 30], [9, 17, 25], causal, Ev=16, window_size=(6, 0), softcap=5.0,
         alibi_slopes="per-sequence")
    # The dense route (CUDA calls the varlen programs do not take) with the same v: the dense
    # backward pads v, o and dO itself.
    monkeypatch.setattr(vb, "packed_block_mask", block_mask)
    monkeypatch.setattr(vb, "_native_backward", lambda *a: None)
    _run([5, 17, 0, 30], [9, 17, 4, 25], causal, Ev=16)
    monkeypatch.setattr(vb, "VALUE_HEAD_DIM", False)
    monkeypatch.setattr(serving, "call_with_value_head_dim", padded)
    _run([5, 17, 0, 30], [9, 17, 4, 25], causal, Ev=16)
