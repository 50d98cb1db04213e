"""tessel.block_mask (run-time block sparsity from a mask_mod) and tessel.attention's indirect key
loop over its lists, on the CPU interpreter: the classification against a numpy brute force,
attention against tessel.reference's float64 attention with the same mask, the checks of a
block mask against the call, and the programs compiled for sm_80."""

import importlib

import numpy as np
import pytest

from dsl_helpers import needs_ptxas  # (it also puts the built package on sys.path)
import tessel
from tessel import language as tl
from tessel import mod_functions
from tessel.reference import max_rel_error, reference_attention

TOL = 2e-5


def brute_force(allowed, B, H, Nq, Nk, BM, BN):
    """(kv_num, kv_indices, full_num, full_indices) as lists, from the numpy mask
    allowed(b, h, qi, ki) evaluated densely."""
    nb, nh = B or 1, H or 1
    nqb, nkb = -(-Nq // BM), -(-Nk // BN)
    out = [np.zeros((nb, nh, nqb), np.int32), np.zeros((nb, nh, nqb, nkb), np.int32),
           np.zeros((nb, nh, nqb), np.int32), np.zeros((nb, nh, nqb, nkb), np.int32)]
    qi, ki = np.arange(Nq)[:, None], np.arange(Nk)[None, :]
    for b in range(nb):
        for h in range(nh):
            m = np.broadcast_to(allowed(b, h, qi, ki), (Nq, Nk))
            for i in range(nqb):
                part, full = [], []
                for j in range(nkb):
                    blk = m[i * BM:(i + 1) * BM, j * BN:(j + 1) * BN]
                    if blk.all() and (j + 1) * BN <= Nk:
                        full.append(j)
                    elif blk.any():
                        part.append(j)
                out[0][b, h, i] = len(part)
                out[1][b, h, i, :len(part)] = part
                out[2][b, h, i] = len(full)
                out[3][b, h, i, :len(full)] = full
    return out


def assert_lists(bm, expected):
    got = (bm.kv_num_blocks, bm.kv_indices, bm.full_kv_num_blocks, bm.full_kv_indices)
    for name, g, e in zip(("kv_num_blocks", "kv_indices", "full_kv_num_blocks",
                           "full_kv_indices"), got, expected):
        assert g.dtype == np.int32 and g.shape == e.shape, name
        np.testing.assert_array_equal(g, e, err_msg=name)


def qkv(B, H, Nq, Nk, D=16, seed=None, Hkv=None):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((B, H, Nq, D)).astype(np.float32)
    k = rng.standard_normal((B, Hkv or H, Nk, D)).astype(np.float32)
    v = rng.standard_normal((B, Hkv or H, Nk, D)).astype(np.float32)
    return q, k, v


def check(mask_mod, allowed, B, H, Nq, Nk, bB, bH, BM=32, BN=32, score_mod=None, score=None,
          block_m=None, block_n=None, **kw):
    """Builds the block mask (classification against the brute force), runs attention with it
    (with kernel blocks block_m x block_n, which divide the mask's, when given) and compares
    with the float64 reference; returns the block mask."""
    bm = tessel.block_mask(mask_mod, bB, bH, Nq, Nk, BLOCK_M=BM, BLOCK_N=BN)
    assert_lists(bm, brute_force(allowed, bB, bH, Nq, Nk, BM, BN))
    q, k, v = qkv(B, H, Nq, Nk, Hkv=kw.get("Hkv"))
    o, lse = tessel.attention(q, k, v, mask_mod=mask_mod, block_mask=bm, return_lse=True,
                              score_mod=score_mod, enable_gqa="Hkv" in kw, block_m=block_m,
                              block_n=block_n)
    ro, rl = reference_attention(q, k, v, allowed=allowed, score=score,
                                 enable_gqa="Hkv" in kw)
    assert max_rel_error(o, ro) < TOL
    finite = np.isfinite(rl)
    assert np.array_equal(np.isfinite(lse), finite)
    assert np.max(np.abs(lse[finite] - rl[finite]), initial=0) < 1e-4
    assert np.all(o[~finite] == 0)
    return bm


# --- masks ---------------------------------------------------------------------------------

def document_mask(doc):
    def mask(b, h, q_idx, kv_idx):
        return (doc[b, q_idx] == doc[b, kv_idx]) & (q_idx >= kv_idx)
    return mask


def random_docs(B, N, rng):
    doc = np.zeros((B, N), np.int32)
    for b in range(B):
        cuts = np.sort(rng.choice(np.arange(1, N), size=3, replace=False))
        doc[b] = np.searchsorted(cuts, np.arange(N), side="right")
    return doc


@pytest.mark.parametrize("N", [128, 150])
def test_document_mask_from_captured_ids(N):
    rng = np.random.default_rng()
    doc = random_docs(2, N, rng)
    allowed = lambda b, h, qi, ki: (doc[b][qi] == doc[b][ki]) & (qi >= ki)
    bm = check(document_mask(doc), allowed, 2, 2, N, N, 2, None)
    assert bm.sparsity() > 0


WINDOW = 40


def sliding_window(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx < WINDOW)


@pytest.mark.parametrize("Nq,BM,BN", [(200, 32, 32), (173, 16, 32), (173, 64, 16), (90, 16, 16)])
def test_sliding_window(Nq, BM, BN):
    allowed = lambda b, h, qi, ki: (qi >= ki) & (qi - ki < WINDOW)
    bm = check(sliding_window, allowed, 1, 2, Nq, Nq, None, None, BM=BM, BN=BN)
    assert bm.kv_num_blocks.shape == (1, 1, -(-Nq // BM))
    if BM == BN == 16:                             # both loops run
        assert bm.full_kv_num_blocks.sum() > 0 and bm.kv_num_blocks.sum() > 0


def test_random_block_sparse_mask_from_a_captured_array():
    rng = np.random.default_rng()
    N, G = 192, 32
    blocks = rng.random((N // G, N // G)) < 0.3
    blocks[2] = False                                  # query rows 64..95 see no key
    mask = lambda b, h, q_idx, kv_idx: blocks[q_idx // G, kv_idx // G]
    allowed = lambda b, h, qi, ki: blocks[qi // G, ki // G]
    # At the mask's granularity every block is full or empty; at 64 some are partial.
    bm = check(mask, allowed, 1, 2, N, N, None, None, BM=32, BN=32)
    assert bm.kv_num_blocks.sum() == 0
    assert bm.full_kv_num_blocks.sum() == blocks.sum()
    check(mask, allowed, 1, 2, N, N, None, None, BM=64, BN=64)


@pytest.mark.parametrize("G", [16, 32, 64])
def test_block_table_and_causal(G):
    """A table of G x G blocks and causality: the diagonal's kernel blocks are partial, so the
    table is read in the masked loop. With 32x32 kernel blocks and G = 32 or 64 each block's
    quotients `q_idx // G` and `kv_idx // G` are the same over the block
    (tile-fold-index-division: the block's number, or its floor division by 2): one table
    entry a block, no per-score gather. A finer table (G = 16) keeps the gather."""
    from tessel import blocksparse
    rng = np.random.default_rng()
    N = 160
    blocks = rng.random((-(-N // G), -(-N // G))) < 0.5
    np.fill_diagonal(blocks, True)
    mask = lambda b, h, q_idx, kv_idx: blocks[q_idx // G, kv_idx // G] & (q_idx >= kv_idx)
    allowed = lambda b, h, qi, ki: blocks[qi // G, ki // G] & (qi >= ki)
    bm = check(mask, allowed, 1, 2, N, N, None, None, BM=32, BN=32)
    assert bm.kv_num_blocks.sum() > 0                   # the partial loop runs
    x = np.zeros((1, 2, N, 32), np.float32)
    args, cx, _, _, _ = blocksparse.prepare(x, x, x, None, None, mask, False, bm, 32, 32, False)
    ir = blocksparse.block_sparse_attention_kernel.warmup(*args, **cx).asm["tile-opt"]
    assert ("tile.gather" in ir) == (G == 16)


@pytest.mark.parametrize("block_m,block_n", [(16, 16), (32, 16), (16, 64)])
def test_kernel_blocks_smaller_than_the_masks(block_m, block_n):
    """A 32x64 mask block is several kernel blocks (as FlexAttention's 128x128 masks are on the
    GPU, where the kernel runs tessel.attention's own blocks): each kernel query block reads its
    mask row, each mask key block is walked in kernel key blocks."""
    rng = np.random.default_rng()
    N = 150
    doc = random_docs(2, N, rng)
    allowed = lambda b, h, qi, ki: (doc[b][qi] == doc[b][ki]) & (qi >= ki)
    check(document_mask(doc), allowed, 2, 2, N, N, 2, None, BM=32, BN=64, block_m=block_m,
          block_n=block_n)


def test_prefix_lm_with_per_batch_prefix_lengths():
    rng = np.random.default_rng()
    N = 160
    prefix = rng.integers(1, N, size=2).astype(np.int32)
    mask = lambda b, h, q_idx, kv_idx: (kv_idx < prefix[b]) | (q_idx >= kv_idx)
    allowed = lambda b, h, qi, ki: (ki < prefix[b]) | (qi >= ki)
    check(mask, allowed, 2, 1, N, N, 2, None)


def test_rows_with_no_visible_key_and_per_head_masks():
    # Query rows past 70 of head 1 see nothing; head 0 sees keys below 90 only.
    mask = lambda b, h, q_idx, kv_idx: ((h == 0) & (kv_idx < 90)) | ((h == 1) & (q_idx < 70)
                                                                      & (q_idx >= kv_idx))
    allowed = lambda b, h, qi, ki: ((h == 0) & (ki < 90)) | ((h == 1) & (qi < 70) & (qi >= ki))
    check(mask, allowed, 2, 2, 130, 110, None, 2)


def test_broadcast_and_explicit_b_h_agree_with_gqa_and_a_score_mod():
    mask = lambda b, h, q_idx, kv_idx: (q_idx - kv_idx) % 3 != 1
    allowed = lambda b, h, qi, ki: (qi - ki) % 3 != 1
    for bB, bH in ((None, None), (2, None), (None, 4), (2, 4)):
        check(mask, allowed, 2, 4, 70, 90, bB, bH, score_mod=softcap,
              score=lambda s, b, h, qi, ki: 5.0 * np.tanh(s / 5.0), Hkv=2)


@tessel.jit
def softcap(score, b, h, q_idx, kv_idx):
    return 5.0 * tl.tanh(score / 5.0)


def test_the_block_mask_is_reused_for_new_inputs():
    bm = tessel.block_mask(sliding_window, None, None, 100, 100, BLOCK_M=32, BLOCK_N=32)
    allowed = lambda b, h, qi, ki: (qi >= ki) & (qi - ki < WINDOW)
    for seed in range(2):
        q, k, v = qkv(1, 1, 100, 100, seed=seed)
        o = tessel.attention(q, k, v, mask_mod=sliding_window, block_mask=bm)
        assert max_rel_error(o, reference_attention(q, k, v, allowed=allowed)[0]) < TOL


# --- checks --------------------------------------------------------------------------------

def test_a_block_mask_that_does_not_fit_the_call_is_a_value_error():
    q, k, v = qkv(2, 2, 100, 100)
    bm = tessel.block_mask(sliding_window, 2, None, 100, 100, BLOCK_M=32, BLOCK_N=32)
    cases = [
        (dict(mask_mod=sliding_window, block_mask=tessel.block_mask(
            sliding_window, None, None, 100, 96, BLOCK_M=32, BLOCK_N=32)), "Nk=96"),
        (dict(mask_mod=sliding_window, block_mask=tessel.block_mask(
            sliding_window, 3, None, 100, 100, BLOCK_M=32, BLOCK_N=32)), "B=3"),
        (dict(mask_mod=sliding_window, block_mask=bm, block_m=64), "block_m=64 must be .* divides the block_mask.s block"),
        (dict(mask_mod=lambda b, h, q_idx, kv_idx: q_idx >= kv_idx, block_mask=bm),
         "another mask_mod"),
        (dict(block_mask=bm), "needs the mask_mod"),
        (dict(mask_mod=sliding_window, block_mask=bm, causal=True), "put the causal condition"),
    ]
    for kw, message in cases:
        with pytest.raises(ValueError, match=message):
            tessel.attention(q, k, v, **kw)
    with pytest.raises(TypeError, match="tessel.BlockMask"):
        tessel.attention(q, k, v, mask_mod=sliding_window, block_mask=object())


def test_a_closure_over_other_tensors_is_another_mask_mod():
    rng = np.random.default_rng(1)
    doc, other = random_docs(1, 64, rng), random_docs(1, 64, rng)
    bm = tessel.block_mask(document_mask(doc), 1, None, 64, 64, BLOCK_M=16, BLOCK_N=16)
    q, k, v = qkv(1, 1, 64, 64)
    tessel.attention(q, k, v, mask_mod=document_mask(doc), block_mask=bm)    # a new closure: ok
    with pytest.raises(ValueError, match="other captured tensors"):
        tessel.attention(q, k, v, mask_mod=document_mask(other), block_mask=bm)
    # Tensors inside a captured list count as tensors (torch's == would not give a bool).
    torch = pytest.importorskip("torch")
    from tessel import blocksparse as bs

    def first_of(ids):
        return lambda b, h, q_idx, kv_idx: ids[0][q_idx] == ids[0][kv_idx]
    ids = [torch.zeros(64, dtype=torch.int32)]
    assert bs._same_mod(first_of(ids), first_of(ids))
    assert not bs._same_mod(first_of(ids), first_of([torch.zeros(64, dtype=torch.int32)]))


def test_a_block_mask_whose_tensors_changed_is_refused():
    """The tensors a mask_mod reads are those its block mask was made from: a cell or global
    rebound to other ids since (the same function then reads them) or, for torch tensors, a
    write in place (their version) is a ValueError, not attention over stale block lists."""
    from tessel import blocksparse as bs
    rng = np.random.default_rng(2)
    doc = random_docs(1, 64, rng)

    def mask(b, h, q_idx, kv_idx):
        return doc[b, q_idx] == doc[b, kv_idx]
    bm = tessel.block_mask(mask, 1, None, 64, 64, BLOCK_M=16, BLOCK_N=16)
    q, k, v = qkv(1, 1, 64, 64)
    tessel.attention(q, k, v, mask_mod=mask, block_mask=bm)
    doc = random_docs(1, 64, rng)                 # the same function, other ids
    with pytest.raises(ValueError, match="not those the block_mask was made from"):
        tessel.attention(q, k, v, mask_mod=mask, block_mask=bm)
    torch = pytest.importorskip("torch")
    ids = torch.zeros(64, dtype=torch.int32)

    def same(b, h, q_idx, kv_idx):
        return ids[q_idx] == ids[kv_idx]
    lists = [np.zeros((1, 1, 4), np.int32), np.zeros((1, 1, 4, 4), np.int32)] * 2
    made = bs.BlockMask(*lists, (None, None, 64, 64), 16, 16, same)
    bs.check_block_mask(made, same, 1, 1, 64, 64, False, False, None, None)
    ids[3] = 1                                    # written in place
    with pytest.raises(ValueError, match="written in place"):
        bs.check_block_mask(made, same, 1, 1, 64, 64, False, False, None, None)


def test_bad_arguments_of_block_mask():
    with pytest.raises(ValueError, match="BLOCK_M"):
        tessel.block_mask(sliding_window, None, None, 10, 10, BLOCK_M=24)
    with pytest.raises(ValueError, match="Nq"):
        tessel.block_mask(sliding_window, None, None, -1, 10)
    with pytest.raises(TypeError, match="mask_mod"):
        tessel.block_mask(None, None, None, 10, 10)
    with pytest.raises(tessel.CompilationError):
        tessel.block_mask(lambda b, h, q_idx, kv_idx: q_idx - kv_idx, None, None, 10, 10)


def test_a_device_that_is_not_cuda_is_a_type_error(monkeypatch):
    # device="tpu" raised AttributeError from inside (torch not imported, or torch.device's
    # RuntimeError): a TypeError that says which devices there are.
    import sys
    pytest.importorskip("torch")
    for device in ("tpu", "meta"):
        with pytest.raises(TypeError, match="'cuda' on the GPU"):
            tessel.block_mask(sliding_window, None, None, 10, 10, device=device)
    monkeypatch.setitem(sys.modules, "torch", None)     # as if the program never imported it
    with pytest.raises(TypeError, match="import torch first"):
        tessel.block_mask(sliding_window, None, None, 10, 10, device="cuda")


@pytest.mark.parametrize("Hkv", [None, 1])
def test_block_sparse_blocks_wider_than_the_head_dim(Hkv):
    """The block-sparse kernel's DB (attention.BLOCK_HEAD_DIM_SPARSE gives a CUDA call at head
    dim 96 blocks of 128): head dim 24 read in blocks 32 wide, columns past 24 as 0, o stored
    24 wide — float64's answer, and the padded copies' within float32 rounding."""
    from tessel import blocksparse
    rng = np.random.default_rng()
    N = 150
    doc = random_docs(2, N, rng)
    allowed = lambda b, h, qi, ki: (doc[b][qi] == doc[b][ki]) & (qi >= ki)
    bm = tessel.block_mask(document_mask(doc), 2, None, N, N, BLOCK_M=32, BLOCK_N=32)
    q, k, v = qkv(2, 2, N, N, D=24, Hkv=Hkv)
    o, lse = blocksparse.attention(q, k, v, None, None, document_mask(doc), Hkv is not None,
                                   True, bm, 16, 32, False, block_dim=32)
    ro, rl = reference_attention(q, k, v, allowed=allowed, enable_gqa=Hkv is not None)
    assert o.shape == q.shape and max_rel_error(o, ro) < TOL
    np.testing.assert_allclose(lse, rl, rtol=1e-5, atol=1e-5)
    padded = tessel.attention(*(np.pad(x, [(0, 0)] * 3 + [(0, 8)]) for x in (q, k, v)),
                              scale=24 ** -0.5, mask_mod=document_mask(doc), block_mask=bm,
                              enable_gqa=Hkv is not None, block_m=16, block_n=32)
    np.testing.assert_allclose(o, padded[..., :24], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("split", [False, True], ids=["one", "split"])
def test_block_sparse_backward_in_blocks_wider_than_the_head_dim(split, monkeypatch):
    """The block-sparse backward's programs with DB (BLOCK_HEAD_DIM_SPARSE with gradients):
    head dim 24 in blocks 32 wide — dQ, dK and dV 24 wide, equal to the dense backward's with
    the same mask_mod, GQA, a score_mod; `split`: dV and dK by two programs, as where
    backward.SPLIT_KEYROWS has the blocks' head dim."""
    from tessel import backward
    from tessel import blocksparse_backward as sb
    monkeypatch.setattr(backward, "SPLIT_KEYROWS", (32,) if split else ())
    rng = np.random.default_rng()
    Nq, Nk = 150, 130
    doc = random_docs(2, max(Nq, Nk), rng)
    mask = lambda b, h, q_idx, kv_idx: (doc[b, q_idx] == doc[b, kv_idx]) & (q_idx >= kv_idx)
    q, k, v = qkv(2, 4, Nq, Nk, D=24, Hkv=2)
    do = rng.standard_normal(q.shape).astype(np.float32)
    bm = tessel.block_mask(mask, 2, None, Nq, Nk, BLOCK_M=32, BLOCK_N=32)
    o, lse = tessel.attention(q, k, v, mask_mod=mask, block_mask=bm, return_lse=True,
                              score_mod=softcap, enable_gqa=True)
    got = sb.backward(q, k, v, o, lse, do, bm, 24 ** -0.5, softcap, mask, 16, 32,
                      block_dim=32)
    want = tessel.attention_backward(q, k, v, o, lse, do, mask_mod=mask, score_mod=softcap,
                                     enable_gqa=True)
    for name, g, w in zip(("dq", "dk", "dv"), got, want):
        assert g.shape == w.shape and max_rel_error(g, w) < 1e-4, name


# --- the GPU programs compile ----------------------------------------------------------------

@needs_ptxas()
@pytest.mark.parametrize("D", [64, 128])
def test_the_programs_compile_for_sm_80(D, tmp_path, monkeypatch):
    """At the default CUDA block mask (128 x 128) the attention kernel, at tessel.attention's
    sm_80 blocks under it, takes the fast path (codegen=mma) with a mask that reads a captured
    tensor and a score_mod. (The classification program: the test below, on both chips.)"""
    monkeypatch.setenv("TESSEL_CACHE_DIR", str(tmp_path))
    N = 1000
    doc = np.zeros((2, N), np.int32)
    mask = document_mask(doc)
    bm = tessel.block_mask(mask, 2, None, N, N, BLOCK_M=128, BLOCK_N=128)
    q = np.zeros((2, 4, N, D), np.float16)
    attention = tessel.compile_attention(q, q, q, mask_mod=mask, block_mask=bm,
                                         score_mod=softcap, block_m=128, block_n=64)
    binary = attention.binary(tessel.GpuOptions(chip="sm_80", codegen="mma"))
    assert binary.cubin and binary.dynamic_shared_bytes <= 163 * 1024


@needs_ptxas()
@pytest.mark.parametrize("chip", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", ["document", "window", "block_table"])
def test_the_classification_program_keeps_its_tiles_in_registers(chip, name, tmp_path,
                                                                 monkeypatch):
    """block_state_kernel at the GPU's 128 x 128 blocks takes the row-blocked lowering with
    masks that gather from captured tensors: shared memory only for its two row sums' exchange
    between warps (the reference lowering keeps every tile there: thousands of shared loads),
    no spill; a cubin within sm_80's shared memory too."""
    from tessel.blocksparse import EVAL_PAIRS, block_state_kernel
    from tessel.attention import _as_jit
    monkeypatch.setenv("TESSEL_CACHE_DIR", str(tmp_path))
    N = 1000
    doc = np.zeros((2, N), np.int32)
    table = np.zeros((8, 8), np.int32)
    mask = {"document": document_mask(doc), "window": sliding_window,
            "block_table": lambda b, h, q_idx, kv_idx: table[q_idx // 128, kv_idx // 128] > 0}
    classify = block_state_kernel.warmup(
        np.zeros((2, 1, 8, 8), np.int32), N, N, 1, 16, BLOCK_M=128, BLOCK_N=128, EVAL=EVAL_PAIRS,
        MASK_MOD=_as_jit(mask[name], "mask_mod"))
    binary = classify.binary(tessel.GpuOptions(chip=chip))
    assert binary.cubin and binary.dynamic_shared_bytes <= 163 * 1024
    assert binary.ptx.count("ld.shared") <= 16, binary.ptx.count("ld.shared")
    assert binary.manifest["spill_bytes"] == 0


def test_no_keys_or_no_queries():
    for Nq, Nk in ((20, 0), (0, 20)):
        bm = tessel.block_mask(sliding_window, None, None, Nq, Nk, BLOCK_M=16, BLOCK_N=16)
        q, k, v = qkv(1, 2, Nq, Nk)
        o, lse = tessel.attention(q, k, v, mask_mod=sliding_window, block_mask=bm,
                                  return_lse=True)
        assert o.shape == q.shape and lse.shape == (1, 2, Nq)
        assert np.all(o == 0) and np.all(lse == -np.inf)


# --- automatic block masks (tessel.attention on CUDA tensors builds them; the helpers here) ----

def test_automatic_block_mask_helpers():
    from tessel import blocksparse as bs
    doc = random_docs(2, 100, np.random.default_rng())
    mask = document_mask(doc)
    # b is read, h is not: the block mask is per batch and shared by the heads.
    assert bs._uses_param(mask, 0) and not bs._uses_param(mask, 1)
    assert bs._reads_tensors(bs._captures_key(mask))
    assert not bs._reads_tensors(bs._captures_key(sliding_window))
    # The key follows the captured values: another array is another key, the same one is not.
    assert bs._captures_key(document_mask(doc)) == bs._captures_key(mask)
    assert bs._captures_key(document_mask(doc.copy())) != bs._captures_key(mask)
    # A list's items are its key: written in place, it is another key; a tensor in it is seen.
    bounds = [3, 9]

    def below(b, h, q_idx, kv_idx):
        return kv_idx < bounds[0]
    before = bs._captures_key(below)
    bounds[0] = 4
    assert bs._captures_key(below) != before
    in_list = [doc]
    assert bs._reads_tensors(bs._captures_key(lambda b, h, i, j: in_list[0][b, i] > 0))
    # A dict the same way: equal items, the same key (a new dict of one config is one mask).
    def window(cfg):
        return lambda b, h, i, j: i - j < cfg["w"]
    assert bs._same_mod(window({"w": 3}), window({"w": 3}))
    assert not bs._same_mod(window({"w": 3}), window({"w": 4}))


def test_automatic_block_masks_follow_new_tensors_in_freed_places(monkeypatch):
    """auto_block_mask's cache (a block mask per mask_mod and captured tensors): a training
    loop's new id tensor each step may take a freed one's Python id and address at the same
    version (as torch CPU tensors of 400 KB did here, and CUDA's caching allocator does) — the
    key alone then matched, and the step ran on another step's block mask. Here every tensor's
    key part is made to match (the worst case of that reuse): the entry's weak references still
    tell a new tensor from the old one. The same tensor unchanged reuses its block mask; written
    in place, it gets a new one. (torch CPU tensors stand in for CUDA ones; the block-mask
    builder is counted.)"""
    torch = pytest.importorskip("torch")
    from tessel import blocksparse as bs
    attn = importlib.import_module("tessel.attention")
    monkeypatch.setattr(attn, "_chip_for_blocks", lambda q: "sm_90a")
    built = []
    monkeypatch.setattr(bs, "_classified", lambda mod, *a, **kw: built.append(mod) or len(built))
    monkeypatch.setattr(bs, "_auto_masks", {})
    real_key = bs._value_key

    def reused_key(v, depth=0, tensors=None, handed=False):
        key = real_key(v, depth, tensors, handed)
        return ("tensor", key[2], tuple(v.shape)) if key[0] == "tensor" else key
    monkeypatch.setattr(bs, "_value_key", reused_key)
    q = torch.zeros(1, 2, 256, 64, dtype=torch.float16)
    doc = None

    def mask(b, h, q_idx, kv_idx):
        return doc[q_idx] == doc[kv_idx]
    for step in range(4):
        doc = torch.full((256,), step, dtype=torch.int32)            # frees the previous one
        assert bs.auto_block_mask(q, q, False, mask, False)[0] == step + 1
    assert bs.auto_block_mask(q, q, False, mask, False)[0] == 4 and len(built) == 4
    doc[0] = 7                                                       # written in place
    assert bs.auto_block_mask(q, q, False, mask, False)[0] == 5


def test_causal_folded_into_a_mask_mod():
    from tessel import blocksparse as bs
    doc = random_docs(1, 150, np.random.default_rng())
    plain = lambda b, h, q_idx, kv_idx: doc[b, q_idx] == doc[b, kv_idx]
    allowed = lambda b, h, qi, ki: (doc[b][qi] == doc[b][ki]) & (qi >= ki)
    check(bs._and_causal(plain), allowed, 1, 2, 150, 150, 1, None)


def test_causal_folded_into_masks_that_read_through_another_mod():
    """auto_block_mask's wrapper over the call's mask_mod: over a window that calls the user's
    mask reading a captured array (tessel.attention's mod with window_size) the lists are
    right — the array was looked for in the wrong function ("a captured tensor changed while
    the kernel was traced", found by the CUDA fuzzer) — and a new array each step (a training
    loop's document ids) reuses one trace of the classification program, where each wrapper
    was a new function (a trace and a cache entry a step)."""
    import importlib
    from tessel import blocksparse as bs
    from tessel.flash_mods import _mask
    attention = importlib.import_module("tessel.attention")
    rng = np.random.default_rng()
    traces = lambda: sum(len(v) for v in bs.block_state_kernel.cache.values())  # noqa: E731
    before, entries = None, None
    for step in range(3):
        doc = random_docs(1, 150, rng)

        def plain(b, h, q_idx, kv_idx):
            return doc[b, q_idx] == doc[b, kv_idx]
        windowed = _mask((40, -1), attention._as_jit(plain, "mask_mod"))
        allowed = (lambda d: lambda b, h, qi, ki: (d[b][qi] == d[b][ki]) & (qi >= ki) &
                   (ki >= qi - 40))(doc)
        check(bs._and_causal(windowed), allowed, 1, 2, 150, 150, 1, None)
        if step == 0:
            before, entries = traces(), len(mod_functions._jitted)
    assert traces() == before and len(mod_functions._jitted) == entries


@pytest.mark.parametrize("Nq,Nk", [(150, 150), (100, 170), (170, 100)])
@pytest.mark.parametrize("BM,BN", [(32, 32), (16, 64), (64, 16)])
def test_causal_classification_leaves_blocks_past_the_diagonal(Nq, Nk, BM, BN):
    """auto_block_mask's causal masks are classified only up to each query block's diagonal:
    the same lists (and causal verdicts) as looking at every block."""
    from tessel import blocksparse as bs
    doc = random_docs(1, max(Nq, Nk), np.random.default_rng())
    mod = bs._and_causal(lambda b, h, q_idx, kv_idx: doc[b, q_idx] == doc[b, kv_idx])
    every = tessel.block_mask(mod, 1, None, Nq, Nk, BLOCK_M=BM, BLOCK_N=BN)
    skipped = bs._classified(mod, 1, None, Nq, Nk, BM, BN, None, causal=True)
    for name in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices",
                 "off_causal"):
        assert np.array_equal(getattr(skipped, name), getattr(every, name)), name


def test_the_dense_backward_from_the_block_sparse_forward():
    """What the CUDA autograd path does with a block mask, on the interpreter: O and LSE from the
    block-sparse forward fed to the dense backward with the mask_mod give the gradients of the
    dense forward's (rows with no key included)."""
    rng = np.random.default_rng()
    N = 150
    doc = random_docs(1, N, rng)
    mask = lambda b, h, q_idx, kv_idx: (doc[b, q_idx] == doc[b, kv_idx]) & (q_idx >= kv_idx) \
        & (q_idx < 140)
    q, k, v = qkv(1, 2, N, N)
    do = rng.standard_normal(q.shape).astype(np.float32)
    bm = tessel.block_mask(mask, 1, None, N, N, BLOCK_M=32, BLOCK_N=32)
    o, lse = tessel.attention(q, k, v, mask_mod=mask, block_mask=bm, return_lse=True)
    od, lsed = tessel.attention(q, k, v, mask_mod=mask, return_lse=True)
    got = tessel.attention_backward(q, k, v, o, lse, do, mask_mod=mask)
    want = tessel.attention_backward(q, k, v, od, lsed, do, mask_mod=mask)
    for g, w in zip(got, want):
        assert max_rel_error(g, w) < 1e-4
    assert np.all(np.isinf(lse[:, :, 140:]))


@pytest.mark.parametrize("split", [False, True], ids=["one", "split"])
@pytest.mark.parametrize("block_m,block_n", [(32, 32), (16, 32), (32, 16)])
def test_block_sparse_backward(block_m, block_n, split, monkeypatch):
    """The backward programs over a block mask (blocksparse_backward: dQ over the key lists,
    dK/dV over the transposed query lists) against the dense backward with the same mask_mod,
    GQA, a score_mod, rows with no key, lengths not a multiple of the blocks; `split`: dV and
    dK by two programs, as at the head dims in backward.SPLIT_KEYROWS (d256), the dK program on
    query blocks of its own and the dQ program on key blocks of its own (d256's candidates)."""
    from tessel import backward
    from tessel import blocksparse_backward as sb
    monkeypatch.setattr(backward, "SPLIT_KEYROWS", (16,) if split else ())
    monkeypatch.setattr(backward, "KEYROWS_DK_BLOCK_M", {16: 8})   # the dK program's own rows
    parts = []

    def launch(program, grid, *args, **cx):
        if program is sb.attention_bwd_dkdv_sparse:
            parts.append((cx.get("PART", 0), cx["BLOCK_M"]))
        if program is sb.attention_bwd_dq_sparse:
            parts.append(("dq", cx["BLOCK_N"]))
        backward._launch(program, grid, *args, **cx)
    real_run = sb.run
    monkeypatch.setattr(sb, "run", lambda *args, **kw: real_run(
        *args, launch=launch, dq_block_n=8 if split else None, **kw))
    rng = np.random.default_rng()
    Nq, Nk = 150, 130
    doc = random_docs(2, max(Nq, Nk), rng)
    mask = lambda b, h, q_idx, kv_idx: (doc[b, q_idx] == doc[b, kv_idx]) & (q_idx >= kv_idx) \
        & (q_idx < 140)
    q, k, v = qkv(2, 4, Nq, Nk, Hkv=2)
    do = rng.standard_normal(q.shape).astype(np.float32)
    bm = tessel.block_mask(mask, 2, None, Nq, Nk, BLOCK_M=32, BLOCK_N=32)
    o, lse = tessel.attention(q, k, v, mask_mod=mask, block_mask=bm, return_lse=True,
                              score_mod=softcap, enable_gqa=True)
    got = sb.backward(q, k, v, o, lse, do, bm, 1 / 4.0, softcap, mask, block_m, block_n)
    want = tessel.attention_backward(q, k, v, o, lse, do, mask_mod=mask, score_mod=softcap,
                                     enable_gqa=True)
    for name, g, w in zip(("dq", "dk", "dv"), got, want):
        assert max_rel_error(g, w) < 1e-4, name
    assert parts == ([("dq", 8), (1, block_m), (2, 8)] if split else
                     [("dq", block_n), (0, block_m)])


def test_a_causal_block_mask_runs_the_dense_causal_kernel(monkeypatch):
    """BlockMask.is_causal: a mask_mod that allows exactly q_idx >= kv_idx (written so, or a
    document mask of one document) at Nq == Nk runs tessel.attention's dense causal kernel and
    its backward — the same results bit for bit — and never the block-sparse programs; other
    masks and other lengths keep them."""
    from tessel import blocksparse as bmod
    rng = np.random.default_rng(4)
    one_doc = np.zeros(100, np.int32)
    causal = lambda b, h, q_idx, kv_idx: q_idx >= kv_idx
    document = lambda b, h, q_idx, kv_idx: (one_doc[q_idx] == one_doc[kv_idx]) & \
        (q_idx >= kv_idx)
    window = lambda b, h, q_idx, kv_idx: (q_idx >= kv_idx) & (q_idx - kv_idx < 10)
    below = lambda b, h, q_idx, kv_idx: q_idx > kv_idx
    assert tessel.block_mask(causal, None, None, 100, 100, BLOCK_M=32, BLOCK_N=32).is_causal
    assert tessel.block_mask(document, 1, 2, 100, 100, BLOCK_M=16, BLOCK_N=32).is_causal
    assert not tessel.block_mask(window, None, None, 100, 100).is_causal
    assert not tessel.block_mask(below, None, None, 100, 100).is_causal   # one pair a row off
    assert not tessel.block_mask(causal, None, None, 80, 100).is_causal   # causal, not square
    q, k, v, do = qkv(1, 2, 100, 100, seed=4) + (rng.standard_normal((1, 2, 100, 16))
                                                 .astype(np.float32),)
    want = tessel.attention(q, k, v, causal=True, score_mod=softcap, return_lse=True)
    want_grads = tessel.attention_backward(q, k, v, *want, do, causal=True, score_mod=softcap)
    monkeypatch.setattr(bmod, "attention", None)                  # not called
    import tessel.blocksparse_backward as sb
    monkeypatch.setattr(sb, "backward", None)
    for mod in (causal, document):
        bm = tessel.block_mask(mod, None, None, 100, 100, BLOCK_M=32, BLOCK_N=32)
        got = tessel.attention(q, k, v, mask_mod=mod, block_mask=bm, score_mod=softcap,
                               return_lse=True)
        assert all(np.array_equal(g, w) for g, w in zip(got, want))
        grads = tessel.attention_backward(q, k, v, *got, do, mask_mod=mod, block_mask=bm,
                                          score_mod=softcap)
        assert all(np.array_equal(g, w) for g, w in zip(grads, want_grads))
    with pytest.raises(ValueError, match="other mask_mod"):     # the checks still hold
        tessel.attention(q, k, v, mask_mod=window, block_mask=bm)


def test_transposed_lists():
    from tessel import blocksparse_backward as sb
    rng = np.random.default_rng()
    blocks = rng.random((5, 4)) < 0.5
    mask = lambda b, h, q_idx, kv_idx: blocks[q_idx // 16, kv_idx // 16] | (q_idx == kv_idx + 3)
    bm = tessel.block_mask(mask, None, None, 80, 64, BLOCK_M=16, BLOCK_N=16)
    q_num, q_idx, fq_num, fq_idx = sb.transposed_lists(bm)
    for kb in range(4):
        for num, idx, knum, kidx in ((q_num, q_idx, bm.kv_num_blocks, bm.kv_indices),
                                     (fq_num, fq_idx, bm.full_kv_num_blocks,
                                      bm.full_kv_indices)):
            want = [qb for qb in range(5) if kb in kidx[0, 0, qb, :knum[0, 0, qb]]]
            assert list(idx[0, 0, kb, :num[0, 0, kb]]) == want
            assert not idx[0, 0, kb, num[0, 0, kb]:].any()


def test_attention_backward_takes_the_block_mask():
    rng = np.random.default_rng()
    N = 100
    doc = random_docs(1, N, rng)
    mask = document_mask(doc)
    q, k, v = qkv(1, 2, N, N)
    do = rng.standard_normal(q.shape).astype(np.float32)
    bm = tessel.block_mask(mask, 1, None, N, N, BLOCK_M=32, BLOCK_N=32)
    o, lse = tessel.attention(q, k, v, mask_mod=mask, block_mask=bm, return_lse=True)
    got = tessel.attention_backward(q, k, v, o, lse, do, mask_mod=mask, block_mask=bm,
                                    block_m=16)
    want = tessel.attention_backward(q, k, v, o, lse, do, mask_mod=mask)
    for g, w in zip(got, want):
        assert max_rel_error(g, w) < 1e-4
    with pytest.raises(ValueError, match="put the causal condition"):
        tessel.attention_backward(q, k, v, o, lse, do, causal=True, mask_mod=mask,
                                  block_mask=bm)


@pytest.mark.parametrize("Hkv", [2, 1], ids=["mha", "gqa"])
def test_block_sparse_backward_of_bf16(Hkv):
    # bf16 host arrays are uint16 bit patterns: Δ = rowsum(dO∘O) and the GQA group sums read
    # their values (they read the bit patterns as numbers before, silently: dq and dk were
    # ~1e10). The block-sparse backward gives the dense backward's bits.
    rng = np.random.default_rng(5)
    N = 96
    mask = document_mask(random_docs(1, N, rng))
    q = tessel.to_bf16(rng.standard_normal((1, 2, N, 32)))
    k, v = (tessel.to_bf16(rng.standard_normal((1, Hkv, N, 32))) for _ in range(2))
    do = tessel.to_bf16(rng.standard_normal(q.shape))
    gqa = dict(enable_gqa=Hkv != 2)
    o, lse = tessel.attention(q, k, v, mask_mod=mask, return_lse=True, **gqa)
    bm = tessel.block_mask(mask, 1, None, N, N, BLOCK_M=32, BLOCK_N=32)
    got = tessel.attention_backward(q, k, v, o, lse, do, mask_mod=mask, block_mask=bm, **gqa)
    want = tessel.attention_backward(q, k, v, o, lse, do, mask_mod=mask, **gqa)
    for g, w in zip(got, want):
        assert g.dtype == np.uint16
        assert max_rel_error(tessel.from_bf16(g), tessel.from_bf16(w)) < 2e-2


def test_uses_param_is_conservative():
    from tessel.blocksparse import _uses_param
    assert not _uses_param(lambda b, h, q, k: q >= k, 0)
    assert _uses_param(lambda b, h, q, k: (q >= k) & (h == 1), 1)
    assert _uses_param(lambda b, h, q, k: (lambda: h)() == q, 1)       # read by a nested function
    assert _uses_param(lambda *a: a[0] == 0, 0)
