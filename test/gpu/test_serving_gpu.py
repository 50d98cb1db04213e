"""tessel.attention_varlen and tessel.attention_with_kvcache on the GPU (issue 12), against a
float64 reference one sequence at a time (tessel.reference). Also the b·h > 65,535 launch.

Run on a machine with a GPU and torch (skipped elsewhere):
    TESSEL_CACHE_DIR=$(mktemp -d) python3 -m pytest -q test/gpu/test_serving_gpu.py
fp16 and bf16 are held to FlashAttention's bound: at most twice the error of the same
attention computed by torch in the input dtype (per sequence, SDPA on the padded sequence), plus
a small absolute slack.
"""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tessel  # noqa: E402
from tessel import language as tl  # noqa: E402
from tessel.reference import reference_kvcache, reference_varlen  # noqa: E402

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
}


# None: the default blocks (the reference lowering); (64, 64): blocks the fast paths take
# (test/python/test_serving_fast_paths.py shows they compile there; these runs check the numbers).
BLOCKS = {"default": (None, None), "fast": (64, 64)}


@pytest.mark.parametrize("blocks", list(BLOCKS))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", list(VARLEN))
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_varlen(dtype, case, causal, blocks):
    lq, lk, H, Hkv, D = VARLEN[case]
    bm, bn = BLOCKS[blocks]
    torch.manual_seed(0)
    dt = DTYPES[dtype]
    q = torch.randn(sum(lq), H, D, device="cuda", dtype=dt)
    k = torch.randn(sum(lk), Hkv, D, device="cuda", dtype=dt)
    v = torch.randn(sum(lk), Hkv, D, device="cuda", dtype=dt)
    cq, ck = cu(lq, "cuda"), cu(lk, "cuda")
    o = tessel.attention_varlen(q, k, v, cq, ck, max(lq), max(lk), causal=causal, block_m=bm,
                                block_n=bn)
    torch.cuda.synchronize()
    assert o.shape == q.shape and o.dtype == dt
    qn, kn, vn = (x.double().cpu().numpy() for x in (q, k, v))
    ref, _ = reference_varlen(qn, kn, vn, cq.cpu().numpy(), ck.cpu().numpy(), causal=causal)
    lowp = torch.cat([lowp_sequence(q[a:b], k[c:d], v[c:d], causal)
                      for a, b, c, d in zip(cq[:-1].tolist(), cq[1:].tolist(),
                                            ck[:-1].tolist(), ck[1:].tolist())])
    lowp_err = float((lowp.double().cpu().numpy() - ref).__abs__().max())
    check(o, ref, lowp_err)


KVCACHE = {
    # (B, Sq, H, Hkv, D, lengths, page)
    "decode-gqa-contig": (4, 1, 8, 2, 128, [1, 100, 2000, 4096], None),
    "decode-mqa-p16": (3, 1, 4, 1, 64, [7, 500, 1025], 16),
    "sq4-gqa-p64": (3, 4, 8, 2, 128, [4, 300, 3000], 64),
    "sq16-p256": (2, 16, 4, 4, 128, [16, 2500], 256),
}


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", list(KVCACHE) + ["decode-gqa-contig-fast"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_kvcache(dtype, case, causal):
    fast = case.endswith("-fast")
    B, Sq, H, Hkv, D, lengths, page = KVCACHE[case.removesuffix("-fast")]
    dt = DTYPES[dtype]
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    q = torch.randn(B, Sq, H, D, device="cuda", dtype=dt)
    if page is None:
        S = max(lengths) + 5
        kc = torch.randn(B, S, Hkv, D, device="cuda", dtype=dt)
        vc = torch.randn(B, S, Hkv, D, device="cuda", dtype=dt)
        table = None
    else:
        max_pages = -(-max(lengths) // page)
        num_pages = B * max_pages + 3
        kc = torch.randn(num_pages, page, Hkv, D, device="cuda", dtype=dt)
        vc = torch.randn(num_pages, page, Hkv, D, device="cuda", dtype=dt)
        table = torch.tensor(rng.permutation(num_pages)[:B * max_pages].reshape(B, max_pages),
                             dtype=torch.int32, device="cuda")     # pages in random order
    seqlens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    o = tessel.attention_with_kvcache(q, kc, vc, seqlens, block_table=table, causal=causal,
                                      **(dict(block_m=64, block_n=64) if fast else {}))
    torch.cuda.synchronize()
    assert o.shape == q.shape and o.dtype == dt
    tn = None if table is None else table.cpu().numpy()
    ref, _ = reference_kvcache(q.double().cpu().numpy(), kc.double().cpu().numpy(),
                               vc.double().cpu().numpy(), lengths, tn, causal=causal)
    lowp = []
    for b, n in enumerate(lengths):
        if table is None:
            kb, vb = kc[b, :n], vc[b, :n]
        else:
            rows = torch.arange(n, device="cuda")
            pages = table[b, rows // page].long()
            kb, vb = kc[pages, rows % page], vc[pages, rows % page]
        lowp.append(lowp_sequence(q[b], kb, vb, causal))
    lowp_err = float((torch.stack(lowp).double().cpu().numpy() - ref).__abs__().max())
    check(o, ref, lowp_err)


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


def test_requires_grad_is_refused():
    q = torch.randn(4, 2, 64, device="cuda", dtype=torch.float16, requires_grad=True)
    lengths = cu([4], "cuda")
    with pytest.raises(NotImplementedError, match="no backward"):
        tessel.attention_varlen(q, q.detach(), q.detach(), lengths, lengths, 4, 4)
    with torch.no_grad():
        o = tessel.attention_varlen(q, q, q, lengths, lengths, 4, 4)
    assert o.shape == q.shape and math.isfinite(o.float().sum().item())


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
