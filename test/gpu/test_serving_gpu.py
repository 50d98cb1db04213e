"""tessel.attention_varlen and tessel.attention_with_kvcache on the GPU (issue 12), against a
float64 reference one sequence at a time (tessel.reference). Also the b·h > 65,535 launch.
attention_with_kvcache is checked on both of its paths: num_splits=1 (one program per query
head, `test_kvcache`) and split-KV decoding with GQA packing (`test_kvcache_split*`: the
heuristic, 3 and 16 splits, the LSE too; lengths 0 to 64k, MQA/GQA/MHA, pages in random order).

Run on a machine with a GPU and torch (skipped elsewhere):
    TESSEL_CACHE_DIR=$(mktemp -d) python3 -m pytest -q test/gpu/test_serving_gpu.py
fp16 and bf16 are held to FlashAttention's bound: at most twice the error of the same
attention computed by torch in the input dtype (per sequence, SDPA on the padded sequence), plus
a small absolute slack.
"""
import importlib
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tessel  # noqa: E402
from tessel import language as tl  # noqa: E402
from tessel.reference import reference_kvcache, reference_rotary, reference_varlen  # noqa: E402

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


def lowp_sequence(q, k, v, causal):
    """The same attention in the input dtype (torch SDPA), q [nq, H, D], k/v [nk, Hkv, D]: the
    error a good low-precision kernel makes."""
    nq, H, D = q.shape
    nk, Hkv = k.shape[0], k.shape[1]
    if nk == 0:
        return torch.zeros_like(q)
    g = H // Hkv
    qt = q.transpose(0, 1)[None]
    kt = k.repeat_interleave(g, dim=1).transpose(0, 1)[None]
    vt = v.repeat_interleave(g, dim=1).transpose(0, 1)[None]
    mask = None
    if causal:
        i = torch.arange(nq, device=q.device)[:, None]
        j = torch.arange(nk, device=q.device)[None, :]
        mask = i + (nk - nq) >= j
    o = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask)
    o = torch.nan_to_num(o)        # rows that see no key: 0, as tessel
    return o[0].transpose(0, 1)


def check(out, ref64, lowp_err):
    err = (out.double().cpu().numpy() - ref64)
    err = float(np.abs(err).max()) if err.size else 0.0
    assert err <= 2 * lowp_err + 1e-3, (err, lowp_err)


def cu(lengths, device):
    return torch.tensor(np.concatenate([[0], np.cumsum(lengths)]), dtype=torch.int32,
                        device=device)


VARLEN = {
    "mixed-gqa": ([1, 17, 300, 1000, 64, 2049], [1, 33, 300, 1500, 64, 3000], 8, 2, 128),
    "mqa-d64": ([5, 700, 128], [5, 900, 4000], 4, 1, 64),
    "mha-d128": ([100, 257], [100, 257], 2, 2, 128),
    # Head dims the fast paths do not take, run padded to 64 / 128 (serving._varlen_padded_dim).
    "gqa-d96": ([3, 400, 129], [3, 700, 129], 4, 2, 96),
    "mha-d40": ([50, 300], [60, 300], 2, 2, 40),
}


# None: the default blocks (64x64 on the fast paths since 2026-12-02, where they passed first
# as explicit blocks; on sm_90a 128x128 at d128 since the forty-eighth session,
# serving_checks.VARLEN_BLOCKS); (32, 32): blocks only the reference lowering takes; 128-row
# blocks (two consumer warpgroups and a producer, as the dense kernels' — 128x128 TMA-fed;
# d256 takes 128x64 only).
BLOCKS = {"default": (None, None), "reference": (32, 32), "wide": (128, 128),
          "tall": (128, 64)}


def check_varlen(dt, lq, lk, H, Hkv, D, causal, seed, used=None, **blocks):
    """attention_varlen on random packed sequences against float64, within twice the error of
    the same attention in the inputs' dtype (torch SDPA, one sequence at a time). used:
    seqused_k (each sequence's keys the first that many of its span)."""
    torch.manual_seed(seed)
    q = torch.randn(sum(lq), H, D, device="cuda", dtype=dt)
    k = torch.randn(sum(lk), Hkv, D, device="cuda", dtype=dt)
    v = torch.randn(sum(lk), Hkv, D, device="cuda", dtype=dt)
    cq, ck = cu(lq, "cuda"), cu(lk, "cuda")
    seqused = None if used is None else torch.tensor(used, dtype=torch.int32, device="cuda")
    o = tessel.attention_varlen(q, k, v, cq, ck, max(lq), max(lk), causal=causal,
                                seqused_k=seqused, **blocks)
    torch.cuda.synchronize()
    assert o.shape == q.shape and o.dtype == dt
    qn, kn, vn = (x.double().cpu().numpy() for x in (q, k, v))
    ref, _ = reference_varlen(qn, kn, vn, cq.cpu().numpy(), ck.cpu().numpy(), causal=causal,
                              seqused_k=used)
    ends = ck[1:].tolist() if used is None else [c + n for c, n in zip(ck.tolist(), used)]
    lowp = torch.cat([lowp_sequence(q[a:b], k[c:d], v[c:d], causal)
                      for a, b, c, d in zip(cq[:-1].tolist(), cq[1:].tolist(),
                                            ck[:-1].tolist(), ends)])
    lowp_err = float((lowp.double().cpu().numpy() - ref).__abs__().max())
    check(o, ref, lowp_err)


@pytest.mark.parametrize("blocks", list(BLOCKS))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", list(VARLEN))
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_varlen(dtype, case, causal, blocks):
    bm, bn = BLOCKS[blocks]
    check_varlen(DTYPES[dtype], *VARLEN[case], causal, 0, block_m=bm, block_n=bn)


@pytest.mark.parametrize("blocks", ["default", "wide", "tall"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", ["mixed-gqa", "mqa-d64", "gqa-d96"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_varlen_compact_grid(monkeypatch, dtype, case, causal, blocks):
    # The compact grid (forty-ninth session, serving_checks.VARLEN_TILES_CUDA): each program's
    # sequence from a map of the batch's query blocks, not B times the longest one's blocks.
    from tessel import serving, serving_checks
    monkeypatch.setattr(serving_checks, "VARLEN_TILES_CUDA", True)
    seen, launch = [], serving._launch
    monkeypatch.setattr(serving, "_launch", lambda f, grid, args, cx: seen.append(
        cx.get("TILES")) or launch(f, grid, args, cx))
    bm, bn = BLOCKS[blocks]
    check_varlen(DTYPES[dtype], *VARLEN[case], causal, 1, block_m=bm, block_n=bn)
    assert seen == [True]


@pytest.mark.parametrize("blocks", ["default", "reference"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", ["mixed-gqa", "mqa-d64", "gqa-d96", "d256"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_varlen_seqused_k(monkeypatch, dtype, case, causal, blocks):
    # FlashAttention-3's seqused_k over packed k and v (serving_checks.PACKED_SEQUSED_CUDA,
    # fifty-second session): sequence b's keys are the first used[b] rows of its span; causal
    # aligned to them; counts of 0, of part and of the whole span.
    from tessel import serving_checks
    monkeypatch.setattr(serving_checks, "PACKED_SEQUSED_CUDA", True)
    lq, lk, H, Hkv, D = VARLEN[case] if case != "d256" else \
        ([3, 400, 129], [3, 700, 300], 4, 2, 256)
    if case == "d256" and blocks == "reference":
        pytest.skip("d256 runs the fast paths' blocks")
    used = [0 if i == 0 else n if i % 2 else n * 2 // 3 for i, n in enumerate(lk)]
    bm, bn = BLOCKS[blocks]
    check_varlen(DTYPES[dtype], lq, lk, H, Hkv, D, causal, 2, used=used, block_m=bm,
                 block_n=bn)


@pytest.mark.parametrize("D", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_varlen_seqused_k_gradients(monkeypatch, dtype, causal, D):
    # seqused_k with gradients: the varlen programs read the counts (USED_K); keys past them
    # get zero gradients.
    from tessel import serving_checks
    monkeypatch.setattr(serving_checks, "PACKED_SEQUSED_CUDA", True)
    check_varlen_backward(dtype, causal, D, used=[4, 300, 0, 1600])


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("D", [256, 192])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_varlen_at_head_dim_256(monkeypatch, dtype, D, causal):
    """serving_checks.VARLEN_FAST_HEAD_DIMS with 256 (off until this passes): varlen at head dim
    256 on the fast paths' 64x64 blocks, and 192 padded to it, against float64 within twice
    torch's own error."""
    from tessel import serving_checks
    monkeypatch.setattr(serving_checks, "VARLEN_FAST_HEAD_DIMS", (64, 128, 256))
    check_varlen(DTYPES[dtype], [1, 70, 300, 513], [1, 90, 300, 700], 4, 2, D, causal,
                 D + causal)


KVCACHE = {
    # (B, Sq, H, Hkv, D, lengths, page)
    "decode-gqa-contig": (4, 1, 8, 2, 128, [1, 100, 2000, 4096], None),
    "decode-mqa-p16": (3, 1, 4, 1, 64, [7, 500, 1025], 16),
    # Pages shorter than a key block (or not a multiple of it): rows looked up one by one.
    "decode-gqa-p16-d128": (4, 1, 8, 2, 128, [1, 100, 2000, 4096], 16),
    "sq4-gqa-p24": (3, 4, 8, 2, 128, [4, 300, 3000], 24),
    "decode-mqa-p1": (2, 1, 4, 1, 64, [5, 700], 1),
    "sq4-gqa-p64": (3, 4, 8, 2, 128, [4, 300, 3000], 64),
    "sq16-p256": (2, 16, 4, 4, 128, [16, 2500], 256),
}


def make_cache(B, Sq, H, Hkv, D, lengths, page, dt, rng):
    """q [B, Sq, H, D] and a contiguous cache [B, S, Hkv, D], or pages [num_pages, page, Hkv, D]
    with a block table handing them out in random order."""
    q = torch.randn(B, Sq, H, D, device="cuda", dtype=dt)
    if page is None:
        S = max(lengths) + 5
        kc = torch.randn(B, S, Hkv, D, device="cuda", dtype=dt)
        vc = torch.randn(B, S, Hkv, D, device="cuda", dtype=dt)
        return q, kc, vc, None
    max_pages = max(1, -(-max(lengths) // page))
    num_pages = B * max_pages + 3
    kc = torch.randn(num_pages, page, Hkv, D, device="cuda", dtype=dt)
    vc = torch.randn(num_pages, page, Hkv, D, device="cuda", dtype=dt)
    table = torch.tensor(rng.permutation(num_pages)[:B * max_pages].reshape(B, max_pages),
                         dtype=torch.int32, device="cuda")     # pages in random order
    return q, kc, vc, table


def run_kvcache(dtype, case, causal, check_lse=False, **kw):
    """attention_with_kvcache on `case` (B, Sq, H, Hkv, D, lengths, page) against float64 and
    against torch in the input dtype; with check_lse also the LSE (finite where float64's is,
    never NaN, rows that see no key 0)."""
    B, Sq, H, Hkv, D, lengths, page = case
    dt = DTYPES[dtype]
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    q, kc, vc, table = make_cache(B, Sq, H, Hkv, D, lengths, page, dt, rng)
    seqlens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    o, lse = tessel.attention_with_kvcache(q, kc, vc, seqlens, block_table=table, causal=causal,
                                           return_lse=True, **kw)
    torch.cuda.synchronize()
    assert o.shape == q.shape and o.dtype == dt and lse.shape == (B, H, Sq)
    key = repr((dtype, case, causal))
    if key not in _REFERENCES:     # the same (seeded) inputs for every num_splits and blocks
        _REFERENCES[key] = references(q, kc, vc, table, lengths, page, causal)
    ref, ref_lse, lowp_err = _REFERENCES[key]
    check(o, ref, lowp_err)
    if check_lse:
        got = lse.cpu().numpy()
        finite = np.isfinite(ref_lse)
        assert not np.isnan(got).any() and (np.isfinite(got) == finite).all()
        np.testing.assert_allclose(got[finite], ref_lse[finite], rtol=1e-4, atol=1e-4)
        dead = ~finite.transpose(0, 2, 1)                   # [B, Sq, H]: rows that see no key
        assert (o.float().cpu().numpy()[dead] == 0).all()


_REFERENCES = {}


def references(q, kc, vc, table, lengths, page, causal):
    """(float64 o, float64 lse, the error of torch in the input dtype) of a cache case: the
    reference runs on each sequence's own keys, gathered (long caches are not converted
    whole)."""
    B, _, _, D = q.shape
    Hkv = kc.shape[2]
    lowp, kept = [], []
    for b, n in enumerate(lengths):
        if table is None:
            kb, vb = kc[b, :n], vc[b, :n]
        else:
            rows = torch.arange(n, device="cuda")
            pages = table[b, rows // page].long()
            kb, vb = kc[pages, rows % page], vc[pages, rows % page]
        lowp.append(lowp_sequence(q[b], kb, vb, causal))
        kept.append((kb.double().cpu().numpy(), vb.double().cpu().numpy()))
    S = max(1, max(lengths))
    kg = np.zeros((B, S, Hkv, D))
    vg = np.zeros((B, S, Hkv, D))
    for b, (kb, vb) in enumerate(kept):
        kg[b, :len(kb)], vg[b, :len(vb)] = kb, vb
    ref, ref_lse = reference_kvcache(q.double().cpu().numpy(), kg, vg, lengths, causal=causal)
    lowp_err = float((torch.stack(lowp).double().cpu().numpy() - ref).__abs__().max())
    return ref, ref_lse, lowp_err


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", list(KVCACHE) + ["decode-gqa-contig-fast", "sq4-gqa-p64-fast",
                                                  "sq16-p256-fast"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_kvcache(dtype, case, causal):
    # num_splits=1: the one-program-per-query-head kernel (the split-KV path below).
    fast = case.endswith("-fast")
    run_kvcache(dtype, KVCACHE[case.removesuffix("-fast")], causal, num_splits=1,
                **(dict(block_m=64, block_n=64) if fast else {}))


# Split-KV decoding and GQA packing (serving_decode.py): (B, Sq, H, Hkv, D, lengths, page).
SPLIT = {
    # issue 12's decode shape (32 query heads, 8 KV heads) at lengths 0 to 9k
    "decode-gqa-contig": (8, 1, 32, 8, 128, [1, 0, 100, 1024, 3000, 64, 8192, 8999], None),
    "decode-gqa-64k": (2, 1, 16, 2, 128, [65536, 777], None),
    "decode-gqa-p256": (4, 1, 32, 8, 128, [0, 1, 4097, 20000], 256),
    "decode-mqa-p16": (3, 1, 8, 1, 64, [7, 500, 1025], 16),
    "decode-gqa-p16": (2, 1, 32, 8, 128, [3000, 17], 16),    # pages shorter than a key
    "decode-gqa-p32": (2, 1, 32, 8, 128, [33, 5000], 32),    # block: rows looked up one by
    "decode-gqa-p7": (2, 1, 32, 8, 128, [2000, 9], 7),       # one (a paged descriptor)
    "decode-mha-d64": (3, 1, 4, 4, 64, [33, 2500, 0], None),
    "sq4-gqa3-p64": (3, 4, 6, 2, 128, [4, 300, 3000], 64),    # a group of 3: padding rows
    "sq2-gqa-contig": (2, 2, 32, 8, 128, [1, 9000], None),     # q packed [B, Hkv, G·Sq, D]
}


@pytest.mark.parametrize("splits", [None, 3, 16], ids=["heuristic", "s3", "s16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", list(SPLIT))
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_kvcache_split(dtype, case, causal, splits):
    run_kvcache(dtype, SPLIT[case], causal, check_lse=True, num_splits=splits)


@pytest.mark.parametrize("D", [96, 80, 40, 160])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_varlen_block_head_dim(monkeypatch, dtype, causal, D):
    # serving_checks.VARLEN_BLOCK_HEAD_DIM (on since this passed): head dims attention_varlen
    # pads (to 128, 64, 256) run the varlen kernel with blocks that wide, q, k and v not copied.
    from tessel import serving, serving_checks
    monkeypatch.setattr(serving_checks, "VARLEN_BLOCK_HEAD_DIM", True)
    monkeypatch.setattr(serving, "_pad_columns", lambda *a: pytest.fail("padded"))
    check_varlen(DTYPES[dtype], [1, 17, 300, 1000, 64], [1, 33, 300, 1500, 64], 8, 2, D,
                 causal, D + causal)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_varlen_native_192(monkeypatch, dtype, causal):
    # serving_checks.VARLEN_NATIVE_HEAD_DIMS (on since this passed): attention_varlen at head
    # dim 192 as it is on sm_90a (wgmma's three slabs), not padded to 256.
    from tessel import serving, serving_checks
    if tessel.gpu.chip_of(torch.cuda.current_device()) != "sm_90a":
        pytest.skip("head dim 192 runs as it is on sm_90a only")
    monkeypatch.setattr(serving_checks, "VARLEN_NATIVE_HEAD_DIMS", {"sm_90a": (192,)})
    monkeypatch.setattr(serving, "_pad_columns", lambda *a: pytest.fail("padded"))
    check_varlen(DTYPES[dtype], [1, 17, 300, 1000, 64], [1, 33, 300, 1500, 64], 8, 2, 192,
                 causal, 192 + causal)
    check_varlen(DTYPES[dtype], [5, 700], [900, 700], 4, 4, 192, causal, 7 + causal)


@pytest.mark.parametrize("E,Ev", [(192, 128), (128, 64), (64, 128)])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_varlen_value_head_dim_kernel(monkeypatch, dtype, causal, E, Ev):
    # serving_checks.VARLEN_VALUE_HEAD_DIM_KERNEL (on since this passed): v of its own head dim
    # through the varlen kernel's DV on sm_90a (DeepSeek's MLA prefill: 192/128, with 192 as it
    # is), not padded; against float64 per sequence.
    from tessel import serving, serving_checks
    if tessel.gpu.chip_of(torch.cuda.current_device()) != "sm_90a":
        pytest.skip("the DV kernels run on sm_90a")
    monkeypatch.setattr(serving_checks, "VARLEN_VALUE_HEAD_DIM_KERNEL", True)
    monkeypatch.setattr(serving_checks, "VARLEN_NATIVE_HEAD_DIMS", {"sm_90a": (192,)})
    monkeypatch.setattr(serving, "call_with_value_head_dim", lambda *a, **kw: pytest.fail("padded"))
    dt = DTYPES[dtype]
    lq, lk, H, Hkv = [1, 17, 300, 1000, 64], [1, 33, 300, 1500, 64], 8, 2
    torch.manual_seed(E + Ev + causal)
    q = torch.randn(sum(lq), H, E, device="cuda", dtype=dt)
    k = torch.randn(sum(lk), Hkv, E, device="cuda", dtype=dt)
    v = torch.randn(sum(lk), Hkv, Ev, device="cuda", dtype=dt)
    cq, ck = cu(lq, "cuda"), cu(lk, "cuda")
    o = tessel.attention_varlen(q, k, v, cq, ck, max(lq), max(lk), causal=causal)
    assert o.shape == (sum(lq), H, Ev) and o.dtype == dt
    qn, kn, vn = (x.double().cpu().numpy() for x in (q, k, v))
    ref, _ = reference_varlen(qn, kn, vn, cq.cpu().numpy(), ck.cpu().numpy(), causal=causal)
    err = np.abs(o.double().cpu().numpy() - ref).max()
    assert err < (2e-2 if dt == torch.bfloat16 else 4e-3) * max(1.0, np.abs(ref).max()), err


# Gemma's head dim (16 query heads, 8 KV heads at 256), decode and a few queries per sequence:
# (B, Sq, H, Hkv, D, lengths, page, num_splits).
KVCACHE_256 = {
    "decode-contig": (3, 1, 16, 8, 256, [1, 700, 5000], None, None),
    "decode-p64": (3, 1, 16, 8, 256, [1, 700, 5000], 64, None),
    "decode-p16": (2, 1, 16, 8, 256, [33, 3000], 16, None),
    "decode-p64-s4": (2, 1, 16, 8, 256, [0, 3000], 64, 4),
    "sq4-p64-onehead": (2, 4, 16, 8, 256, [4, 3000], 64, 1),
    "sq4-contig-onehead": (2, 4, 8, 8, 256, [4, 1000], None, 1),
}


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", list(KVCACHE_256))
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_kvcache_at_head_dim_256(monkeypatch, dtype, case, causal):
    # serving_checks.KVCACHE_FAST_HEAD_DIMS' 256 (on since this passed): the split-KV
    # program (decode's default, and 4 splits) and the cache kernel (num_splits=1) at 64x64 by
    # default, contiguous and paged (pages of 64 rows, and of 16: each row looked up).
    from tessel import serving, serving_checks
    monkeypatch.setattr(serving_checks, "KVCACHE_FAST_HEAD_DIMS", (64, 128, 256))
    chosen = []

    def fast_blocks(*a):
        chosen.append(serving_checks._fast_blocks(*a))
        return chosen[-1]
    monkeypatch.setattr(serving, "_fast_blocks", fast_blocks)
    *shape, splits = KVCACHE_256[case]
    run_kvcache(dtype, tuple(shape), causal, check_lse=True, num_splits=splits)
    assert chosen == [(64, 64)]


@pytest.mark.parametrize("block_n", [0, 32], ids=["fast", "bn32"])
@pytest.mark.parametrize("page", [16, 32])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_kvcache_256_small_pages(monkeypatch, dtype, page, block_n):
    # The one-program cache kernel at d256 over pages that 64 does not divide, at 64x64 (which
    # spills) and at 64x32 (serving_checks.SMALL_PAGE_256_BLOCK_N, forty-eighth session: 0
    # spill), causal, against float64.
    from tessel import serving_checks
    monkeypatch.setattr(serving_checks, "SMALL_PAGE_256_BLOCK_N", block_n)
    run_kvcache(dtype, (2, 5, 16, 8, 256, [5, 3000], page), True, check_lse=True,
                num_splits=1)


# Caches of head dims the fast paths do not take (Phi-3's 96, 80, 192, 40), read in blocks of
# the next one they take (the kernels' DB): (B, Sq, H, Hkv, D, lengths, page, num_splits).
KVCACHE_BLOCK_DIM = {
    "d96-decode-contig": (3, 1, 32, 8, 96, [1, 700, 5000], None, None),
    "d96-decode-p16": (2, 1, 32, 8, 96, [33, 3000], 16, None),
    "d96-sq4-p64-onehead": (2, 4, 8, 8, 96, [4, 3000], 64, 1),
    "d80-decode-p64-s4": (2, 1, 32, 32, 80, [0, 3000], 64, 4),
    "d192-decode-contig": (2, 1, 16, 8, 192, [700, 5000], None, None),
    "d192-decode-p16": (2, 1, 16, 8, 192, [33, 3000], 16, None),
    "d192-sq4-contig-onehead": (2, 4, 8, 8, 192, [4, 1000], None, 1),
    "d40-decode-p64": (2, 1, 8, 2, 40, [100, 2000], 64, None),
}


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", list(KVCACHE_BLOCK_DIM))
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_kvcache_block_head_dim(monkeypatch, dtype, case, causal):
    # serving_checks.KVCACHE_BLOCK_HEAD_DIM (on since this passed): the split-KV program and
    # the cache kernel at 64x64 with blocks of the next fast head dim, the cache not copied.
    from tessel import serving, serving_checks
    monkeypatch.setattr(serving_checks, "KVCACHE_BLOCK_HEAD_DIM", True)
    chosen = []

    def fast_blocks(*a):
        chosen.append(serving_checks._fast_blocks(*a))
        return chosen[-1]
    monkeypatch.setattr(serving, "_fast_blocks", fast_blocks)
    monkeypatch.setattr(serving, "_pad_columns", lambda *a: pytest.fail("padded"))
    *shape, splits = KVCACHE_BLOCK_DIM[case]
    run_kvcache(dtype, tuple(shape), causal, check_lse=True, num_splits=splits)
    assert chosen == [(64, 64)]


@pytest.mark.parametrize("splits", [None, 4])
@pytest.mark.parametrize("case", ["decode-gqa-contig", "decode-gqa-64k", "sq2-gqa-contig",
                                  "decode-gqa-p256", "decode-gqa-p16", "decode-gqa-p7"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_kvcache_split_fast_blocks(dtype, case, splits):
    # 64 x 64 blocks: the split kernel on the fast paths, contiguous and paged (page 256 = 4
    # blocks, a page looked up per block; pages of 16 and 7 rows, each row looked up), as
    # test/python/test_serving_fast_paths.py compiles them.
    run_kvcache(dtype, SPLIT[case], True, check_lse=True, num_splits=splits, block_m=64,
                block_n=64)


def test_num_splits_uses_the_devices_sm_count():
    from tessel import serving_decode
    q = torch.zeros(1, 1, 1, 8, device="cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert serving_decode.num_sms(q) == sms


def test_huge_batch_heads_runs():
    # Issue 12's report: 1,750 x 40 heads of 16 tokens failed with "cuLaunchKernel failed:
    # invalid argument". Checked against torch's SDPA on a few (b, h) rows, first and last.
    q = torch.randn(1750, 40, 16, 64, device="cuda", dtype=torch.float16)
    o = tessel.attention(q, q, q, causal=True)
    torch.cuda.synchronize()
    for b, h in ((0, 0), (874, 17), (1749, 39)):
        x = q[b, h].double()[None, None]
        ref = torch.nn.functional.scaled_dot_product_attention(x, x, x, is_causal=True)[0, 0]
        assert (o[b, h].double() - ref).abs().max().item() < 5e-3


def test_grad_of_q_alone():
    # attention_varlen is differentiable since the thirty-fifth session (this test asserted
    # it refused grad until then). q alone requires grad: o has a graph, q.grad is the float64
    # reference's (k, v detached get none); under no_grad o has no graph.
    gen = torch.Generator(device="cuda").manual_seed(11)
    q = torch.randn(40, 2, 64, device="cuda", generator=gen).half().requires_grad_()
    kv = torch.randn(40, 2, 64, device="cuda", generator=gen).half()
    lengths = cu([4, 36], "cuda")
    o = tessel.attention_varlen(q, kv, kv, lengths, lengths, 36, 36, causal=True)
    assert o.requires_grad
    g = torch.randn(o.shape, device="cuda", generator=gen)
    (o.float() * g).sum().backward()
    ref_q = q.detach().double().requires_grad_()
    loss = 0.0
    for a, b in ((0, 4), (4, 40)):
        Q, K = ref_q[a:b].transpose(0, 1), kv[a:b].double().transpose(0, 1)
        s = (Q @ K.transpose(-1, -2) / 8.0).masked_fill(
            torch.ones(b - a, b - a, dtype=torch.bool, device="cuda").triu(1), float("-inf"))
        loss = loss + ((torch.softmax(s, -1) @ K).transpose(0, 1) * g[a:b].double()).sum()
    loss.backward()
    err = float((q.grad.double() - ref_q.grad).abs().max())
    assert err <= 1e-2 * max(1.0, float(ref_q.grad.abs().max())), err
    with torch.no_grad():
        o = tessel.attention_varlen(q, kv, kv, lengths, lengths, 36, 36)
    assert not o.requires_grad and math.isfinite(o.float().sum().item())


@tessel.jit
def pick(x, out, n, i):
    xd = tl.make_desc(x, shape=(n,), strides=(1,))
    od = tl.make_desc(out, shape=(1,), strides=(1,))
    s = tl.load_scalar(xd, (i,), padding=-2)
    tl.store(od, (0,), tl.full((1,), s.to(tl.float32), tl.float32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32])
def test_load_scalar_every_dtype(dtype):
    values = torch.tensor([1.5, -3.25, 7.0, 0.5]).to(dtype).cuda()
    out = torch.zeros(1, device="cuda")
    for i, want in [(0, values[0].item()), (3, values[3].item()), (4, -2), (-1, -2)]:
        pick[(1,)](values, out, 4, i)
        assert out.item() == float(want), (dtype, i)


def test_paged_decode_example_on_the_gpu():
    import os
    import pathlib
    import subprocess
    import sys
    script = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python" / "decode_paged.py"
    r = subprocess.run([sys.executable, str(script), "--cuda"], capture_output=True, text=True,
                       timeout=600, env=dict(os.environ))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "decode_paged: max error vs float64 numpy" in r.stdout


@pytest.mark.parametrize("mods", ["window+cap", "alibi"])
@pytest.mark.parametrize("path", ["varlen", "kvcache", "split", "split-s4"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_flash_arguments(dtype, path, mods):
    # FlashAttention's window_size (Mistral's (W, 0)) and softcap on the serving kernels,
    # bottom-right aligned, against tessel.reference's float64 attention with the same window
    # and cap (twenty-ninth session; the fast paths at 64x64 blocks); ALiBi's slopes per query
    # head (thirty-fifth session: the split-KV program's rows are several heads, each row its
    # own head's slope).
    gen = torch.Generator(device="cuda").manual_seed(len(path))
    dt = DTYPES[dtype]
    H = 8 if path == "varlen" else 32
    if mods == "alibi":
        slopes = torch.rand(H, device="cuda", generator=gen) * 0.05
        given, ref_mods = dict(alibi_slopes=slopes), dict(alibi=slopes.cpu().numpy())
    else:
        given = dict(window_size=(700, 0), softcap=30.0)
        ref_mods = dict(window=(700, 0), softcap=30.0)
    tol = {"f16": 5e-3, "bf16": 2e-2}[dtype]
    if path == "varlen":
        lq, lk = [1, 300, 2000], [5, 2500, 2000]
        q = torch.randn(sum(lq), H, 128, device="cuda", generator=gen).to(dt)
        k, v = (torch.randn(sum(lk), 2, 128, device="cuda", generator=gen).to(dt)
                for _ in range(2))
        o = tessel.attention_varlen(q, k, v, cu(lq, "cuda"), cu(lk, "cuda"), max(lq), max(lk),
                                    causal=True, block_m=64, block_n=64, **given)
        ref, _ = reference_varlen(*(x.double().cpu().numpy() for x in (q, k, v)),
                                  np.concatenate([[0], np.cumsum(lq)]),
                                  np.concatenate([[0], np.cumsum(lk)]), causal=True, **ref_mods)
    else:
        lengths = [5, 3000, 9000]
        B, S = len(lengths), max(lengths)
        q = torch.randn(B, 1, H, 128, device="cuda", generator=gen).to(dt)
        kc, vc = (torch.randn(B, S, 8, 128, device="cuda", generator=gen).to(dt)
                  for _ in range(2))
        seqlens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
        splits = {"kvcache": 1, "split": None, "split-s4": 4}[path]
        o = tessel.attention_with_kvcache(q, kc, vc, seqlens, causal=True, num_splits=splits,
                                          **given)
        ref, _ = reference_kvcache(*(x.double().cpu().numpy() for x in (q, kc, vc)),
                                   np.array(lengths), causal=True, **ref_mods)
    err = float(np.abs(o.double().cpu().numpy() - ref).max())
    assert err <= tol * max(1.0, float(np.abs(ref).max())), err


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_varlen_backward(dtype, causal):
    # attention_varlen's gradients (thirty-fifth session: the dense backward over the packed
    # rows under a per-sequence mask and its block mask, python/tessel/varlen_backward.py)
    # against float64 torch autograd one sequence at a time; GQA, an empty sequence, rows past
    # the last sequence.
    check_varlen_backward(dtype, causal, 128)


@pytest.mark.parametrize("D", [96, 80])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_varlen_block_head_dim_gradients(monkeypatch, dtype, causal, D):
    # serving_checks.VARLEN_BLOCK_HEAD_DIM_GRAD (on since this passed): with gradients, head
    # dims attention_varlen pads run the varlen kernel and the block-sparse backward's programs
    # in blocks of the padded head dim over the packed tensors as they are (DB), not copied.
    from tessel import backward, serving, serving_checks
    attn = importlib.import_module("tessel.attention")
    chip = tessel.gpu.chip_of(torch.cuda.current_device())
    monkeypatch.setattr(serving_checks, "VARLEN_BLOCK_HEAD_DIM_GRAD", True)
    monkeypatch.setattr(attn, "BLOCK_HEAD_DIM_SPARSE", True)
    monkeypatch.setattr(backward, "BLOCK_HEAD_DIM_CHIPS", (chip,))
    monkeypatch.setattr(serving, "_pad_columns", lambda *a: pytest.fail("padded"))
    monkeypatch.setattr(backward, "_backward_padded",
                        lambda *a, **kw: pytest.fail("took the padded backward"))
    check_varlen_backward(dtype, causal, D)


@pytest.mark.parametrize("grid", ["full", "compact"])
@pytest.mark.parametrize("D", [64, 128, 96, 192, 256])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_varlen_programs_backward(monkeypatch, dtype, causal, D, grid):
    # varlen_backward.NATIVE_CHIPS: attention_varlen's gradients by the varlen programs (each
    # sequence's own blocks, forty-sixth session), not the dense backward over the packed rows;
    # on the full grid and the compact one (varlen_backward.TILES_CUDA, forty-ninth session).
    from tessel import varlen_backward as vb
    chip = tessel.gpu.chip_of(torch.cuda.current_device())
    if D in (192, 256) and chip != "sm_90a":
        pytest.skip("the fast backward takes head dims 192 and 256 on sm_90a only")
    monkeypatch.setattr(vb, "NATIVE_CHIPS", (chip,))
    monkeypatch.setattr(vb, "TILES_CUDA", grid == "compact")
    monkeypatch.setattr(vb, "packed_block_mask",
                        lambda *a, **kw: pytest.fail("took the dense backward"))
    check_varlen_backward(dtype, causal, D)


@pytest.mark.parametrize("E,Ev", [(192, 128), (128, 64)])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_varlen_value_head_dim_gradients(monkeypatch, dtype, causal, E, Ev):
    # varlen_backward.VALUE_HEAD_DIM_CUDA (forty-ninth session; on since this passed in the
    # fifty-first): a v narrower than q with gradients (MLA on packed sequences) at its own width, the varlen
    # kernel's DV forward and the varlen programs' DV, not padded.
    from tessel import serving
    from tessel import varlen_backward as vb
    if tessel.gpu.chip_of(torch.cuda.current_device()) != "sm_90a":
        pytest.skip("the varlen programs' DV runs on sm_90a")
    monkeypatch.setattr(vb, "VALUE_HEAD_DIM_CUDA", True)
    monkeypatch.setattr(serving, "call_with_value_head_dim",
                        lambda *a, **kw: pytest.fail("padded"))
    monkeypatch.setattr(vb, "packed_block_mask",
                        lambda *a, **kw: pytest.fail("took the dense backward"))
    check_varlen_backward(dtype, causal, E, Ev=Ev)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_varlen_programs_backward_with_flash_arguments(monkeypatch, dtype):
    # The varlen programs with FlashAttention's window, soft cap and ALiBi (per sequence and
    # head), bottom-right aligned as the forward's.
    from tessel import varlen_backward as vb
    monkeypatch.setattr(vb, "NATIVE_CHIPS", (tessel.gpu.chip_of(torch.cuda.current_device()),))
    monkeypatch.setattr(vb, "NATIVE_FLASH_MODS", True)
    monkeypatch.setattr(vb, "packed_block_mask",
                        lambda *a, **kw: pytest.fail("took the dense backward"))
    slopes = torch.rand(4, 8, device="cuda", generator=torch.Generator(device="cuda")
                        .manual_seed(5)) * 0.05
    check_varlen_backward(dtype, True, 128, window=(200, 0), softcap=20.0, slopes=slopes)


def check_varlen_backward(dtype, causal, D, window=None, softcap=None, slopes=None, Ev=None,
                          used=None):
    gen = torch.Generator(device="cuda").manual_seed(7 + D)
    dt = DTYPES[dtype]
    lq, lk = [1, 300, 0, 1500], [5, 300, 7, 1700]
    H, Hkv = 8, 2
    q = torch.randn(sum(lq) + 5, H, D, device="cuda", generator=gen).to(dt).requires_grad_()
    k, v = (torch.randn(sum(lk) + 3, Hkv, d, device="cuda", generator=gen).to(dt)
            .requires_grad_() for d in (D, Ev or D))
    o = tessel.attention_varlen(q, k, v, cu(lq, "cuda"), cu(lk, "cuda"), max(lq), max(lk),
                                causal=causal, window_size=window, softcap=softcap,
                                alibi_slopes=slopes, seqused_k=None if used is None else
                                torch.tensor(used, dtype=torch.int32, device="cuda"))
    nk = lk if used is None else used
    g = torch.randn(o.shape, device="cuda", generator=gen, dtype=torch.float32)
    g[sum(lq):] = 0
    (o.float() * g).sum().backward()
    refs = [x.detach().double().requires_grad_() for x in (q, k, v)]
    loss, cq, ck = 0.0, np.cumsum([0] + lq), np.cumsum([0] + lk)
    for b in range(len(lq)):
        if lq[b] == 0:
            continue
        Q = refs[0][cq[b]:cq[b + 1]].transpose(0, 1)
        K, V = (r[ck[b]:ck[b] + nk[b]].transpose(0, 1).repeat_interleave(H // Hkv, 0)
                for r in refs[1:])
        s = Q @ K.transpose(-1, -2) / math.sqrt(D)
        i = torch.arange(lq[b], device="cuda")[:, None] + nk[b] - lq[b]
        j = torch.arange(nk[b], device="cuda")[None, :]
        if softcap:
            s = softcap * torch.tanh(s / softcap)
        if slopes is not None:
            s = s - slopes[b].double()[:, None, None] * (i - j).abs()
        if causal:
            s = s.masked_fill(i < j, float("-inf"))
        if window is not None:
            s = s.masked_fill((j < i - window[0]) | (j > i + window[1]), float("-inf"))
        loss = loss + ((torch.softmax(s, -1) @ V).transpose(0, 1) *
                       g[cq[b]:cq[b + 1]].double()).sum()
    loss.backward()
    tol = {"f16": 1e-2, "bf16": 5e-2}[dtype]
    for got, ref in zip((q, k, v), refs):
        err = float((got.grad.double() - ref.grad).abs().max())
        assert err <= tol * max(1.0, float(ref.grad.abs().max())), err
    assert not q.grad[sum(lq):].any() and not k.grad[sum(lk):].any()
    for b in range(len(lk) if used else 0):      # keys past the counts: no gradient
        assert not k.grad[ck[b] + nk[b]:ck[b + 1]].any() and \
            not v.grad[ck[b] + nk[b]:ck[b + 1]].any()


@pytest.mark.parametrize("Sq", [1, 7])
@pytest.mark.parametrize("paged", [False, True], ids=["contiguous", "paged"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_kvcache_append(monkeypatch, dtype, paged, Sq):
    # attention_with_kvcache's k=, v= (forty-sixth session): the new rows written into the
    # cache in place (pages in any order, rows crossing pages), the rest of the cache as it was,
    # the attention against float64 over cache_seqlens + Sk keys; a sequence whose new rows
    # pass the cache's capacity has the rows past it dropped, not written out of bounds.
    from tessel import kvcache_append
    monkeypatch.setattr(kvcache_append, "CUDA_CHECKED", True)
    gen = torch.Generator(device="cuda").manual_seed(11 + Sq + paged)
    dt = DTYPES[dtype]
    B, H, Hkv, D, page, pages_each = 3, 8, 2, 128, 16, 40     # 640 keys a sequence
    lengths = [0, 300, 640 - Sq + 1]                          # the last overflows by one row
    seqlens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    if paged:
        n_pages = B * pages_each + 5
        table = torch.randperm(n_pages, device="cuda", generator=gen)[:B * pages_each]
        table = table.view(B, pages_each).to(torch.int32)
        shape = (n_pages, page, Hkv, D)
    else:
        table, shape = None, (B, pages_each * page, Hkv, D)
    kc, vc = (torch.randn(shape, device="cuda", generator=gen).to(dt) for _ in range(2))
    kn, vn = (torch.randn(B, Sq, Hkv, D, device="cuda", generator=gen).to(dt) for _ in range(2))
    q = torch.randn(B, Sq, H, D, device="cuda", generator=gen).to(dt)
    want_k, want_v = kc.clone(), vc.clone()
    for b in range(B):
        for i in range(Sq):
            pos = lengths[b] + i
            if pos >= pages_each * page:
                continue
            at = (int(table[b, pos // page]), pos % page) if paged else (b, pos)
            want_k[at], want_v[at] = kn[b, i], vn[b, i]
    o = tessel.attention_with_kvcache(q, kc, vc, seqlens, block_table=table, causal=True,
                                      k=kn, v=vn)
    assert torch.equal(kc, want_k) and torch.equal(vc, want_v)
    assert seqlens.tolist() == lengths
    total = [min(n + Sq, pages_each * page) for n in lengths]
    if paged:      # the float64 reference reads a contiguous cache
        rows = torch.arange(pages_each * page, device="cuda")
        kcc, vcc = (w[table.long()[:, rows // page], rows % page] for w in (want_k, want_v))
    else:
        kcc, vcc = want_k, want_v
    ref, _ = reference_kvcache(*(x.double().cpu().numpy() for x in (q, kcc, vcc)),
                               np.array(total), causal=True)
    tol = {"f16": 5e-3, "bf16": 2e-2}[dtype]
    err = float(np.abs(o.double().cpu().numpy() - ref).max())
    assert err <= tol * max(1.0, float(np.abs(ref).max())), err


@pytest.mark.parametrize("Sq,splits", [(1, None), (1, 1), (64, 1)],
                         ids=["decode", "decode1", "prefill"])
@pytest.mark.parametrize("D", [64, 128, 96])
def test_kvcache_batch_index_leftpad(monkeypatch, D, Sq, splits):
    # cache_batch_idx (the contiguous cache read as pages of S rows, the index the table) and
    # cache_leftpad (a mask mod reading the paddings) on the fast kernels and the split-KV path,
    # causal, against float64 over the rows they name; a sequence padded whole sees no key.
    from tessel import serving_checks
    monkeypatch.setattr(serving_checks, "LEFTPAD_CHECKED", True)
    gen = torch.Generator(device="cuda").manual_seed(D + Sq + (splits or 0))
    B, Bc, S, H, Hkv = 3, 5, 1024, 8, 2
    idx = torch.tensor([4, 0, 2], dtype=torch.int32, device="cuda")
    lengths, pads = [900, 70, 1024], [500, 70, 3]
    seqlens, leftpad = (torch.tensor(x, dtype=torch.int32, device="cuda")
                        for x in (lengths, pads))
    kc, vc = (torch.randn(Bc, S, Hkv, D, device="cuda", generator=gen).half() for _ in range(2))
    q = torch.randn(B, Sq, H, D, device="cuda", generator=gen).half()
    o, lse = tessel.attention_with_kvcache(q, kc, vc, seqlens, causal=True, return_lse=True,
                                           num_splits=splits, cache_batch_idx=idx,
                                           cache_leftpad=leftpad)
    ref, rlse = reference_kvcache(*(x.double().cpu().numpy() for x in (q, kc, vc)),
                                  np.array(lengths), causal=True, batch_idx=idx.cpu().numpy(),
                                  leftpad=np.array(pads))
    err = float(np.abs(o.double().cpu().numpy() - ref).max())
    assert err <= 5e-3 * max(1.0, float(np.abs(ref).max())), err
    assert torch.equal(o[1], torch.zeros_like(o[1])) and bool(torch.isneginf(lse[1]).all())
    # The index alone reaches the plans: a second call with new tensors replays the first's.
    o1 = tessel.attention_with_kvcache(q, kc, vc, seqlens, causal=True, num_splits=splits,
                                       cache_batch_idx=idx)
    o2 = tessel.attention_with_kvcache(q.clone(), kc, vc, seqlens.clone(), causal=True,
                                       num_splits=splits, cache_batch_idx=idx.clone())
    ref1, _ = reference_kvcache(*(x.double().cpu().numpy() for x in (q, kc, vc)),
                                np.array(lengths), causal=True, batch_idx=idx.cpu().numpy())
    assert torch.equal(o1, o2)
    err = float(np.abs(o1.double().cpu().numpy() - ref1).max())
    assert err <= 5e-3 * max(1.0, float(np.abs(ref1).max())), err


@pytest.mark.parametrize("batch", ["mixed", "decode", "mixed_packed", "spec", "spec_packed",
                                   "mixed_packed_tiles", "mixed_tiles"])
@pytest.mark.parametrize("page", [16, 64])
@pytest.mark.parametrize("D", [128, 64, 96, 256])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_varlen_paged(monkeypatch, dtype, D, page, batch):
    # attention_varlen with block_table (forty-seventh session, varlen_cache_kernel): decode
    # steps and prefill chunks of one batch against a paged cache in shuffled pages, causal,
    # against float64 over each sequence's keys gathered from its pages; seqused_k given.
    # mixed_packed (forty-eighth session): the mixed batch's decode steps by the split-KV
    # program beside varlen_cache_kernel's SKIP_SINGLE launch (PACK_DECODE_ROWS_CUDA).
    # _tiles: the compact grid (serving_checks.VARLEN_TILES_CUDA, forty-ninth session).
    from tessel import serving_checks, varlen_cache
    monkeypatch.setattr(serving_checks, "VARLEN_TILES_CUDA", batch.endswith("_tiles"))
    batch = batch.replace("_tiles", "")
    monkeypatch.setattr(varlen_cache, "CUDA_CHECKED", True)
    monkeypatch.setattr(varlen_cache, "PACK_DECODE_ROWS_CUDA", batch == "mixed_packed")
    # spec: a few queries a sequence (speculative decoding), one launch or gathered for
    # attention_with_kvcache (FEW_QUERIES_PACKED_CUDA, forty-eighth session).
    monkeypatch.setattr(varlen_cache, "FEW_QUERIES_PACKED_CUDA", batch == "spec_packed")
    batch = batch.replace("_packed", "")
    gen = torch.Generator(device="cuda").manual_seed(D + page)
    dt = DTYPES[dtype]
    H, Hkv = 8, 2
    # decode: one query a sequence at most (the split-KV program, VARLEN_Q).
    nq = {"mixed": [1, 300, 1, 0, 64, 7], "decode": [1, 1, 1, 0, 1, 1],
          "spec": [4, 3, 4, 0, 1, 2]}[batch]
    nk = [2000, 300, 1, 50, 1500, 777]
    per = -(-max(nk) // page)
    n_pages = len(nk) * per + 3
    table = torch.randperm(n_pages, device="cuda", generator=gen)[:len(nk) * per]
    table = table.view(len(nk), per).to(torch.int32)
    kc, vc = (torch.randn(n_pages, page, Hkv, D, device="cuda", generator=gen).to(dt)
              for _ in range(2))
    cu_q = torch.tensor(np.concatenate([[0], np.cumsum(nq)]), dtype=torch.int32, device="cuda")
    q = torch.randn(sum(nq), H, D, device="cuda", generator=gen).to(dt)
    used = torch.tensor(nk, dtype=torch.int32, device="cuda")
    o = tessel.attention_varlen(q, kc, vc, cu_q, None, max(nq), max(nk), causal=True,
                                block_table=table, seqused_k=used)
    rows = [torch.arange(n, device="cuda") for n in nk]
    k = torch.cat([kc[table[b].long()[r // page], r % page] for b, r in enumerate(rows)])
    v = torch.cat([vc[table[b].long()[r // page], r % page] for b, r in enumerate(rows)])
    cu_k = np.concatenate([[0], np.cumsum(nk)])
    ref, _ = reference_varlen(*(x.double().cpu().numpy() for x in (q, k, v)),
                              cu_q.cpu().numpy(), cu_k, causal=True)
    tol = {"f16": 5e-3, "bf16": 2e-2}[dtype]
    err = float(np.abs(o.double().cpu().numpy() - ref).max())
    assert err <= tol * max(1.0, float(np.abs(ref).max())), err


@pytest.mark.parametrize("R", [128, 64], ids=["whole", "partial"])
@pytest.mark.parametrize("interleaved", [True, False], ids=["gptj", "neox"])
def test_kvcache_rotary(monkeypatch, interleaved, R):
    # rotary_cos/rotary_sin with k=, v= (forty-sixth session): the new keys rotated at their
    # positions before they are written, q at the same positions (causal), against float64.
    from tessel import kvcache_append
    monkeypatch.setattr(kvcache_append, "CUDA_CHECKED", True)
    gen = torch.Generator(device="cuda").manual_seed(R + interleaved)
    B, S, H, Hkv, D, Sq = 2, 512, 8, 2, 128, 4
    lengths = [10, 300]
    seqlens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    kc, vc = (torch.randn(B, S, Hkv, D, device="cuda", generator=gen).half() for _ in range(2))
    kn, vn = (torch.randn(B, Sq, Hkv, D, device="cuda", generator=gen).half() for _ in range(2))
    q = torch.randn(B, Sq, H, D, device="cuda", generator=gen).half()
    angle = torch.arange(S, device="cuda")[:, None] / 10000 ** (
        torch.arange(R // 2, device="cuda")[None, :] * 2 / R)
    cos, sin = angle.cos().half(), angle.sin().half()
    kc0 = kc.clone()
    o = tessel.attention_with_kvcache(q, kc, vc, seqlens, causal=True, k=kn, v=vn,
                                      rotary_cos=cos, rotary_sin=sin,
                                      rotary_interleaved=interleaved)

    table = [x.double().cpu().numpy() for x in (cos, sin)]
    want_k, qr = kc0.double().cpu().numpy(), q.double().cpu().numpy()
    for b in range(B):
        pos = np.arange(Sq) + lengths[b]
        want_k[b, pos] = reference_rotary(kn[b].double().cpu().numpy(), *table, pos, interleaved)
        qr[b] = reference_rotary(qr[b], *table, pos, interleaved)
    assert float(np.abs(kc.double().cpu().numpy() - want_k).max()) <= 1e-2
    ref, _ = reference_kvcache(qr, want_k, vc.double().cpu().numpy(),
                               np.array([n + Sq for n in lengths]), causal=True)
    err = float(np.abs(o.double().cpu().numpy() - ref).max())
    assert err <= 5e-3 * max(1.0, float(np.abs(ref).max())), err
