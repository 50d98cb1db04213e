"""tessel.attention and its variants on the interpreter, against float64 numpy references."""
import importlib

import numpy as np
import pytest

import dsl_helpers  # noqa: F401  (puts the built package on sys.path)
import tessel
from tessel import _tessel
from tessel import language as tl
from tessel.reference import max_rel_error, reference_attention

pytestmark = pytest.mark.skipif(not _tessel.has_interpreter,
                                reason="this build has no interpreter (branch interp not merged)")


def inputs(B=1, H=2, Nq=17, Nk=None, D=16, Hkv=None, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((B, H, Nq, D)).astype(dtype)
    k = rng.standard_normal((B, Hkv or H, Nk or Nq, D)).astype(dtype)
    v = rng.standard_normal((B, Hkv or H, Nk or Nq, D)).astype(dtype)
    return q, k, v


@pytest.mark.parametrize("n", [1, 17, 100])
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_f32(n, causal):
    q, k, v = inputs(Nq=n)
    o, lse = tessel.attention(q, k, v, causal=causal, return_lse=True)
    ref_o, ref_lse = reference_attention(q, k, v, causal=causal)
    assert max_rel_error(o, ref_o) < 1e-5
    assert max_rel_error(lse, ref_lse) < 1e-5


@pytest.mark.parametrize("Nk,causal,mod,even", [(64, False, None, True),
                                                 (128, False, "softcap", True),
                                                 (100, False, None, False),
                                                 (64, True, None, False)])
def test_whole_key_blocks_take_one_key_loop(monkeypatch, Nk, causal, mod, even):
    # Key lengths that are a multiple of the key block, with no mask but the key tail, take the
    # kernel without it (EVEN_N, attention.even_keys): one key loop, no masked copy; the same
    # outputs, bit for bit, as the kernel for ragged lengths, which visits the same blocks in
    # the same order.
    attention_module = importlib.import_module("tessel.attention")  # the module
    q, k, v = inputs(Nq=40, Nk=Nk, D=32)
    score_mod = None
    if mod == "softcap":
        def score_mod(score, b, h, q_idx, kv_idx):
            return 5.0 * tl.tanh(score / 5.0)
    kernel = tessel.compile_attention(q, k, v, causal=causal, score_mod=score_mod)
    assert ("EVEN_N", "constexpr", "bool", even) in kernel.specialization
    assert _one_loop(kernel) == even, kernel.asm["tile-opt"]
    o, lse = tessel.attention(q, k, v, causal=causal, score_mod=score_mod, return_lse=True)
    monkeypatch.setattr(attention_module, "EVEN_KEYS", False)
    o1, lse1 = tessel.attention(q, k, v, causal=causal, score_mod=score_mod, return_lse=True)
    assert np.array_equal(o, o1) and np.array_equal(lse, lse1)
    s = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k.astype(np.float64)) / np.sqrt(32)
    if mod == "softcap":
        s = 5.0 * np.tanh(s / 5.0)
    if causal:
        s = np.where(np.arange(40)[:, None] >= np.arange(Nk)[None, :], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)
    assert max_rel_error(o, want) < 1e-5


def _block_first(monkeypatch, causal, Nq, Nk, bm, bn, mod):
    """tessel.attention at D 32 with (32, bm, bn) in attention.PEELED_BLOCKS (the diagonal or
    the last key block first where a call may), against float64, output and LSE. Returns the
    kernel and its inputs and score_mod."""
    monkeypatch.setattr(importlib.import_module("tessel.attention"), "PEELED_BLOCKS",
                        {(32, bm, bn)})
    q, k, v = inputs(Nq=Nq, Nk=Nk, D=32, seed=Nq + Nk)
    score_mod = None
    if mod == "softcap":
        def score_mod(score, b, h, q_idx, kv_idx):
            return 5.0 * tl.tanh(score / 5.0)
    args = dict(causal=causal, score_mod=score_mod, block_m=bm, block_n=bn)
    kernel = tessel.compile_attention(q, k, v, **args)
    o, lse = tessel.attention(q, k, v, return_lse=True, **args)
    score = (lambda s, b, h, qi, ki: 5.0 * np.tanh(s / 5.0)) if mod else None
    ref_o, ref_lse = reference_attention(q, k, v, causal=causal, score=score)
    assert max_rel_error(o, ref_o) < 1e-5
    assert np.abs(lse - ref_lse).max() < 1e-5 * max(1.0, np.abs(ref_lse).max())
    return kernel, (q, k, v), args


def _one_loop(kernel):
    """Whether the kernel's key loop is one loop, no masked copy beside it."""
    ir = kernel.asm["tile-opt"]
    return ir.count("scf.for") == 1 and "tile.block_mask" not in ir


@pytest.mark.parametrize("Nq,Nk,block,taken", [(200, 200, 64, True), (256, 256, 128, True),
                                                (100, 300, 32, True), (17, 17, 16, True),
                                                (300, 100, 64, False)])
@pytest.mark.parametrize("mod", [None, "softcap"])
def test_diagonal_block_first(monkeypatch, Nq, Nk, block, taken, mod):
    # attention.DIAGONAL_BLOCK_FIRST: causal rows run their diagonal block first, masked, then
    # the blocks before it, in one loop (FlashAttention-3's order, the masked block as the
    # overlapped consumers' peel), here at small blocks too (PEELED_BLOCKS: d128 128x128 by
    # default). Where Nq > Nk a query block may have no diagonal block: the general kernel.
    kernel, _, _ = _block_first(monkeypatch, True, Nq, Nk, block, block, mod)
    assert ("DIAGONAL_FIRST", "constexpr", "bool", taken) in kernel.specialization
    assert _one_loop(kernel) == taken, kernel.asm["tile-opt"]


@pytest.mark.parametrize("Nq,Nk,bm,bn", [(40, 200, 32, 64), (64, 256, 64, 64), (70, 17, 32, 16),
                                         (33, 5, 16, 16), (100, 129, 64, 64)])
@pytest.mark.parametrize("mod", [None, "softcap"])
def test_tail_block_first(monkeypatch, Nq, Nk, bm, bn, mod):
    # attention.TAIL_BLOCK_FIRST: non-causal rows run their last key block first, masked at
    # the key tail (the overlapped consumers' peel), then the others unmasked, in one loop; at
    # every key length, whole blocks included (PEELED_BLOCKS: d128 128x128 by default; the
    # switch is off by default, slower on the H200). With the switch off the same blocks take
    # EVEN_N or the split: another order, so float64 is the judge.
    monkeypatch.setattr(importlib.import_module("tessel.attention"), "TAIL_BLOCK_FIRST", True)
    kernel, qkv, args = _block_first(monkeypatch, False, Nq, Nk, bm, bn, mod)
    assert ("TAIL_FIRST", "constexpr", "bool", True) in kernel.specialization
    assert ("EVEN_N", "constexpr", "bool", False) in kernel.specialization
    assert _one_loop(kernel), kernel.asm["tile-opt"]
    monkeypatch.setattr(importlib.import_module("tessel.attention"), "TAIL_BLOCK_FIRST", False)
    off = tessel.compile_attention(*qkv, **args)
    assert ("TAIL_FIRST", "constexpr", "bool", False) in off.specialization
    assert ("EVEN_N", "constexpr", "bool", Nk % bn == 0) in off.specialization


@pytest.mark.parametrize("Nq,Nk,bm,bn,taken", [(80, 80, 64, 16, True), (80, 200, 64, 16, True),
                                               (150, 150, 64, 16, True), (100, 100, 64, 32, False),
                                               (96, 96, 32, 32, False), (33, 5, 16, 16, False)])
@pytest.mark.parametrize("gqa", [False, True])
def test_align_query_blocks_to_end(monkeypatch, Nq, Nk, bm, bn, taken, gqa):
    # attention.ALIGN_QUERY_BLOCKS_TO_END: causal query blocks end at the last row, so the
    # block cut short is the first (its rows before 0 neither read nor written: the other
    # heads' rows stay right). Taken where the tiles then visit fewer key blocks
    # (causal_block_cost), not where the blocks are whole or the shift off the key blocks'
    # grid masks more than it saves; forced on in every case with a short block, against
    # float64 (output and LSE) and the call with the switch off.
    mod = importlib.import_module("tessel.attention")
    H, Hkv = (4, 2) if gqa else (3, 3)
    q, k, v = inputs(Nq=Nq, Nk=Nk, H=H, Hkv=Hkv, D=32, seed=Nq + 3 * Nk)
    args = dict(causal=True, block_m=bm, block_n=bn, enable_gqa=gqa)
    kernel = tessel.compile_attention(q, k, v, **args)
    assert ("ALIGN_END", "constexpr", "bool", taken) in kernel.specialization
    monkeypatch.setattr(mod, "causal_block_cost", lambda nq, nk, m, n, aligned: -aligned)
    forced = Nq % bm != 0
    kernel = tessel.compile_attention(q, k, v, **args)
    assert ("ALIGN_END", "constexpr", "bool", forced) in kernel.specialization
    o, lse = tessel.attention(q, k, v, return_lse=True, **args)
    ref_o, ref_lse = reference_attention(q, k, v, causal=True, enable_gqa=gqa)
    assert max_rel_error(o, ref_o) < 1e-5
    finite = np.isfinite(ref_lse)
    assert np.array_equal(np.isfinite(lse), finite)
    assert np.abs(lse - ref_lse)[finite].max() < 1e-5 * max(1.0, np.abs(ref_lse[finite]).max())
    # A score_mod sees every row index: the blocks then start at row 0.
    with_mod = tessel.compile_attention(q, k, v, score_mod=lambda s, b, h, qi, ki: s, **args)
    assert ("ALIGN_END", "constexpr", "bool", False) in with_mod.specialization
    monkeypatch.setattr(mod, "ALIGN_QUERY_BLOCKS_TO_END", False)
    off = tessel.compile_attention(q, k, v, **args)
    assert ("ALIGN_END", "constexpr", "bool", False) in off.specialization
    assert max_rel_error(tessel.attention(q, k, v, **args), o) < 1e-5


def test_different_query_and_key_lengths_and_scale():
    q, k, v = inputs(Nq=9, Nk=40)
    o = tessel.attention(q, k, v, scale=0.3)
    assert max_rel_error(o, reference_attention(q, k, v, scale=0.3)[0]) < 1e-5


def test_causal_with_more_keys_than_queries_masks_whole_rows_to_zero():
    # top-left aligned: query i sees keys 0..i, whatever Nk is
    q, k, v = inputs(Nq=20, Nk=5)
    o, lse = tessel.attention(q, k, v, causal=True, return_lse=True)
    ref_o, ref_lse = reference_attention(q, k, v, causal=True)
    assert max_rel_error(o, ref_o) < 1e-5


def test_fully_masked_rows_are_zero():
    @tessel.jit
    def nothing(b, h, q_idx, kv_idx):
        return q_idx < 3
    q, k, v = inputs(Nq=10)
    o, lse = tessel.attention(q, k, v, mask_mod=nothing, return_lse=True)
    assert np.all(o[:, :, 3:] == 0) and np.all(np.isneginf(lse[:, :, 3:]))
    ref = reference_attention(q, k, v, allowed=lambda b, h, qi, ki: qi < 3)[0]
    assert max_rel_error(o, ref) < 1e-5


def test_grouped_query_attention():
    q, k, v = inputs(H=4, Hkv=2, Nq=17)
    o = tessel.attention(q, k, v, causal=True, enable_gqa=True)
    assert max_rel_error(o, reference_attention(q, k, v, causal=True, enable_gqa=True)[0]) < 1e-5
    with pytest.raises(ValueError, match="enable_gqa"):
        tessel.attention(q, k, v)


def test_sliding_window_and_prefix_lm():
    @tessel.jit
    def window(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (q_idx - kv_idx < 5)

    @tessel.jit
    def prefix(b, h, q_idx, kv_idx):
        return (kv_idx < 6) | (q_idx >= kv_idx)
    q, k, v = inputs(Nq=33)
    o = tessel.attention(q, k, v, mask_mod=window)
    ref = reference_attention(q, k, v, allowed=lambda b, h, qi, ki: (qi >= ki) & (qi - ki < 5))
    assert max_rel_error(o, ref[0]) < 1e-5
    o = tessel.attention(q, k, v, mask_mod=prefix)
    ref = reference_attention(q, k, v, allowed=lambda b, h, qi, ki: (ki < 6) | (qi >= ki))
    assert max_rel_error(o, ref[0]) < 1e-5


def test_alibi_and_softcap_score_mods():
    @tessel.jit
    def alibi(score, b, h, q_idx, kv_idx):
        return score + tl.exp2(-(h + 1).to(tl.float32)) * (kv_idx - q_idx).to(tl.float32)

    @tessel.jit
    def softcap(score, b, h, q_idx, kv_idx):
        return 2.0 * tl.tanh(score / 2.0)
    q, k, v = inputs(Nq=17)
    o = tessel.attention(q, k, v, causal=True, score_mod=alibi)
    ref = reference_attention(q, k, v, causal=True,
                              score=lambda s, b, h, qi, ki: s + 2.0 ** -(h + 1) * (ki - qi))
    assert max_rel_error(o, ref[0]) < 1e-5
    o = tessel.attention(q, k, v, score_mod=softcap)
    ref = reference_attention(q, k, v, score=lambda s, b, h, qi, ki: 2.0 * np.tanh(s / 2.0))
    assert max_rel_error(o, ref[0]) < 1e-5


ALIBI_SLOPES = np.array([0.5, 2.0 ** -6], np.float32)


def alibi_128(score, b, h, q_idx, kv_idx):
    return score + ALIBI_SLOPES[h] * (kv_idx - q_idx)


def distance_128(score, b, h, q_idx, kv_idx):
    return score - 0.25 * (q_idx - kv_idx) - (q_idx + 2 * kv_idx) / 512.0


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("mod", ["alibi", "distance"])
@pytest.mark.parametrize("D", [16, 128])
def test_affine_biases_are_separated_in_128_row_blocks(monkeypatch, causal, mod, D):
    """At the GPU's 128-row blocks tile-separate-bias computes an affine bias per row and per
    column (no per-score conversion left in the IR); the interpreter runs that IR and it matches
    float64, output and LSE (whose row part is added back after the loop), with lengths that
    are not a multiple of the block. At D 128 (attention.PEELED_BLOCKS) the key loop runs the
    diagonal or (TAIL_BLOCK_FIRST on) the last key block first, whose block index is a select:
    still separated."""
    monkeypatch.setattr(importlib.import_module("tessel.attention"), "TAIL_BLOCK_FIRST", True)
    score = {"alibi": alibi_128, "distance": distance_128}[mod]
    ref_score = {"alibi": lambda s, b, h, qi, ki: s + float(ALIBI_SLOPES[h]) * (ki - qi),
                 "distance": lambda s, b, h, qi, ki: s - 0.25 * (qi - ki) - (qi + 2 * ki) / 512.0}
    q, k, v = inputs(H=2, Nq=200, Nk=300, D=D)
    kernel = tessel.compile_attention(q, k, v, causal=causal, score_mod=score, block_m=128,
                                      block_n=128)
    first = "DIAGONAL_FIRST" if causal else "TAIL_FIRST"
    assert (first, "constexpr", "bool", D == 128) in kernel.specialization
    opt = kernel.asm["tile-opt"]
    assert "sitofp" in opt and " : tensor<128x128xi32> to" not in opt
    o, lse = tessel.attention(q, k, v, causal=causal, score_mod=score, block_m=128, block_n=128,
                              return_lse=True)
    ref_o, ref_lse = reference_attention(q, k, v, causal=causal, score=ref_score[mod])
    assert max_rel_error(o, ref_o) < 1e-5
    assert np.abs(lse - ref_lse).max() < 1e-4 * max(1.0, np.abs(ref_lse).max())


def test_document_mask():
    starts = (5, 12)

    @tessel.jit
    def doc(idx):
        d = idx * 0
        for s in starts:
            d = d + (idx >= s).to(tl.int32)
        return d

    @tessel.jit
    def same_doc(b, h, q_idx, kv_idx):
        return doc(q_idx) == doc(kv_idx)

    def doc_np(i):
        return sum((i >= s).astype(int) for s in starts)
    q, k, v = inputs(Nq=17)
    o = tessel.attention(q, k, v, mask_mod=same_doc)
    ref = reference_attention(q, k, v, allowed=lambda b, h, qi, ki: doc_np(qi) == doc_np(ki))
    assert max_rel_error(o, ref[0]) < 1e-5


def test_bf16_as_uint16_bits():
    qf, kf, vf = inputs(Nq=17)
    q, k, v = (tessel.to_bf16(x) for x in (qf, kf, vf))
    o = tessel.attention(q, k, v, causal=True)
    assert o.dtype == np.uint16
    ref = reference_attention(*(tessel.from_bf16(x) for x in (q, k, v)), causal=True)[0]
    assert max_rel_error(tessel.from_bf16(o), ref) < 1e-2


def test_f16():
    q, k, v = inputs(Nq=17, dtype=np.float16)
    o = tessel.attention(q, k, v)
    assert o.dtype == np.float16
    assert max_rel_error(o, reference_attention(q, k, v)[0]) < 1e-2


def test_user_kernel_runs_on_a_grid():
    @tessel.jit
    def row_softmax(x, y, n, BLOCK: tl.constexpr, W: tl.constexpr):
        pid = tl.program_id(0)
        d = tl.make_desc(x, shape=(n, W), strides=(W, 1))
        e = tl.make_desc(y, shape=(n, W), strides=(W, 1))
        t = tl.load(d, (pid * BLOCK, 0), shape=(BLOCK, W))
        tl.store(e, (pid * BLOCK, 0), tl.softmax(t, axis=1) * 2.0)
    x = np.random.default_rng(1).standard_normal((10, 8)).astype(np.float32)
    y = np.zeros_like(x)
    row_softmax[(3,)](x, y, 10, BLOCK=4, W=8)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    assert np.allclose(y, 2 * e / e.sum(axis=1, keepdims=True), rtol=1e-5)


def test_read_only_output_array_raises():
    # The runtime copies a read-only array to pass it; it used to drop the kernel's writes to the
    # copy silently (issue 15, finding 6). A read-only input the kernel only reads stays fine.
    @tessel.jit
    def double(x, y, n, BLOCK: tl.constexpr):
        d = tl.make_desc(x, shape=(n,), strides=(1,))
        e = tl.make_desc(y, shape=(n,), strides=(1,))
        tl.store(e, (0,), tl.load(d, (0,), shape=(BLOCK,)) * 2.0)
    x = np.arange(8, dtype=np.float32)
    x.flags.writeable = False
    y = np.zeros(8, np.float32)
    double[(1,)](x, y, 8, BLOCK=8)
    assert np.array_equal(y, 2 * np.arange(8))
    y = np.zeros(8, np.float32)
    y.flags.writeable = False
    with pytest.raises(ValueError, match="argument 'y' of double is a read-only array"):
        double[(1,)](x, y, 8, BLOCK=8)


@pytest.mark.parametrize("shape", [(1, 2, 0, 16), (0, 2, 8, 16), (1, 0, 8, 16)])
def test_no_query_rows_give_an_empty_result(shape):
    # As on the GPU path (issue 15, finding 11): no rows, batches or heads is an empty result,
    # not "cannot run on a grid of 0x2x1".
    q = np.zeros(shape, np.float32)
    k = np.zeros(shape[:2] + (4, shape[3]), np.float32)
    o, lse = tessel.attention(q, k, k, return_lse=True)
    assert o.shape == shape and lse.shape == shape[:3]


def test_head_dim_zero_is_a_clear_error():
    # The default scale is 1/sqrt(D): D = 0 raised ZeroDivisionError from inside _prepare.
    q = np.zeros((1, 2, 8, 0), np.float32)
    with pytest.raises(ValueError, match="head dim 0"):
        tessel.attention(q, q, q)


def test_runaway_loop_is_refused_with_a_clear_error(monkeypatch):
    # Issue 15, finding 5: a loop of 2^31 iterations used to abort the whole Python process with
    # "LLVM ERROR: out of memory"; now the default step budget refuses it at once, and
    # TESSEL_MAX_STEPS changes the budget.
    @tessel.jit
    def spin(y, n):
        acc = 0.0
        for i in range(n):
            acc = acc + 1.0
            acc = acc * 1.0
        d = tl.make_desc(y, shape=(1,), strides=(1,))
        tl.store(d, (0,), tl.full((1,), 0.0, tl.float32) + acc)
    y = np.zeros(1, np.float32)
    with pytest.raises(tessel.KernelRuntimeError, match=r"would run 2147483647 iterations, past "
                       r"the interpreter's step limit of 4294967296 \(tessel-run --max-steps"):
        spin[(1,)](y, 2**31 - 1)
    monkeypatch.setenv("TESSEL_MAX_STEPS", "100")
    with pytest.raises(tessel.KernelRuntimeError, match="step limit of 100 "):
        spin[(1,)](y, 1000)
    monkeypatch.setenv("TESSEL_MAX_STEPS", "0")
    spin[(1,)](y, 1000)
    assert y[0] == 1000.0


def test_constant_operands_of_minimum_and_where():
    # Found by the DSL fuzzer (tools/dsl-fuzz): tl.minimum of two numbers failed with the message
    # "'min'", and tl.where with two numbers raised AttributeError from the front end.
    @tessel.jit
    def consts(x, y, n, BLOCK: tl.constexpr):
        d = tl.make_desc(x, shape=(n,), strides=(1,))
        e = tl.make_desc(y, shape=(n,), strides=(1,))
        t = tl.load(d, (0,), shape=(BLOCK,))
        tl.store(e, (0,), tl.where(t > 0.0, 1.5, -2.0) + tl.minimum(3.0, 8.0) + tl.maximum(1, 2))
    x = np.array([-1, 1, -2, 2], np.float32)
    y = np.zeros(4, np.float32)
    consts[(1,)](x, y, 4, BLOCK=4)
    assert np.array_equal(y, np.where(x > 0, 1.5, -2.0) + 5.0)


@pytest.mark.parametrize("blocks,error,match", [
    ((-16, None), ValueError, "block_m must be at least 1"),
    ((None, 0), ValueError, "block_n must be at least 1"),
    ((True, 16), TypeError, "block_m must be an int"),
    ((16.0, 16), TypeError, "block_m must be an int"),
    ((16, "16"), TypeError, "block_n must be an int")])
def test_bad_block_sizes_are_clear_errors(blocks, error, match):
    # block_m=-16 made a grid that computed wrong rows (max error 3.8) without a word; 16.0 and
    # True failed inside the library's source; block_n=0 meant the default.
    q = np.random.default_rng(0).standard_normal((1, 2, 40, 32)).astype(np.float32)
    bm, bn = blocks
    with pytest.raises(error, match=match):
        tessel.attention(q, q, q, causal=True, block_m=bm, block_n=bn)
    with pytest.raises(error, match=match):
        tessel.compile_attention(q, q, q, block_m=bm, block_n=bn)
    with pytest.raises(error, match=match):
        tessel.attention_backward(q, q, q, q, np.zeros((1, 2, 40), np.float32), q,
                                  block_m=bm, block_n=bn)


@pytest.mark.parametrize("scale,error,match", [
    ("0.1", TypeError, "scale must be a real number"),
    (True, TypeError, "scale must be a real number"),
    ([0.1], TypeError, "scale must be a real number"),
    (float("nan"), ValueError, "scale must be finite"),
    (float("inf"), ValueError, "scale must be finite")])
def test_bad_scales_are_clear_errors(scale, error, match):
    # A string failed inside float() with "could not convert string to float"; NaN and inf
    # gave NaN rows without a word.
    q = np.random.default_rng(0).standard_normal((1, 2, 24, 16)).astype(np.float32)
    lse = np.zeros((1, 2, 24), np.float32)
    calls = [lambda: tessel.attention(q, q, q, scale=scale),
             lambda: tessel.compile_attention(q, q, q, scale=scale),
             lambda: tessel.attention_backward(q, q, q, q, lse, q, scale=scale),
             lambda: tessel.attention_varlen(q[0].transpose(1, 0, 2), q[0].transpose(1, 0, 2),
                                             q[0].transpose(1, 0, 2),
                                             np.array([0, 24], np.int32),
                                             np.array([0, 24], np.int32), 24, 24, scale=scale)]
    for call in calls:
        with pytest.raises(error, match=match):
            call()


def test_scales_of_numpy_and_zero_stay_allowed():
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, 2, 24, 16)).astype(np.float32) for _ in range(3))
    for scale in (np.float32(0.3), np.float64(-0.2), 0, 0.0):
        want, _ = reference_attention(q, k, v, scale=float(scale))
        o = tessel.attention(q, k, v, scale=scale)
        assert np.abs(np.asarray(o, np.float64) - want).max() < 1e-5


def test_odd_block_sizes_still_run_on_the_interpreter():
    # Positive sizes that are not powers of two stay allowed (the fast paths take multiples of
    # 16 such as 80; the interpreter any): exact against float64.
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, 2, 40, 32)).astype(np.float32) for _ in range(3))
    want, _ = reference_attention(q, k, v, causal=True)
    for bm, bn in ((24, 24), (np.int64(16), 48), (3, 16)):
        o = tessel.attention(q, k, v, causal=True, block_m=bm, block_n=bn)
        assert np.abs(np.asarray(o, np.float64) - want).max() < 1e-5


def test_integer_arrays_are_a_clear_error():
    q = np.ones((1, 1, 8, 16), np.int32)
    with pytest.raises(TypeError, match="tessel.attention takes float32, float16, bf16"):
        tessel.attention(q, q, q)


def test_numpy_value_head_dim_of_its_own():
    """numpy inputs whose v has its own head dim (SDPA's Ev): o has v's columns, against
    float64."""
    rng = np.random.default_rng(40)
    q = rng.standard_normal((1, 2, 9, 40)).astype(np.float32)
    k = rng.standard_normal((1, 2, 11, 40)).astype(np.float32)
    v = rng.standard_normal((1, 2, 11, 24)).astype(np.float32)
    o = tessel.attention(q, k, v, causal=True)
    s = q.astype(np.float64) @ k.astype(np.float64).swapaxes(-1, -2) / np.sqrt(40)
    s = np.where(np.tril(np.ones((9, 11), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = (p / p.sum(-1, keepdims=True)) @ v
    assert o.shape == (1, 2, 9, 24) and o.flags["C_CONTIGUOUS"]
    assert np.abs(o - ref).max() < 1e-5


@pytest.mark.parametrize("E,Ev", [(48, 32), (32, 48), (64, 16)])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_value_head_dim_kernel(monkeypatch, E, Ev, causal):
    """attention.VALUE_HEAD_DIM_KERNEL (on since its GPU check): a v of its own head
    dim runs the kernels' DV (P·V and o at v's width) instead of padding — the same answer as
    the padded call, against float64, and the kernel is specialized on DV."""
    import importlib
    attn = importlib.import_module("tessel.attention")
    rng = np.random.default_rng(E + Ev + causal)
    q = rng.standard_normal((2, 2, 37, E)).astype(np.float32)
    k = rng.standard_normal((2, 1, 50, E)).astype(np.float32)
    v = rng.standard_normal((2, 1, 50, Ev)).astype(np.float32)
    assert attn.VALUE_HEAD_DIM_KERNEL
    monkeypatch.setattr(attn, "VALUE_HEAD_DIM_KERNEL", False)
    padded = tessel.attention(q, k, v, causal=causal, enable_gqa=True)
    monkeypatch.setattr(attn, "VALUE_HEAD_DIM_KERNEL", True)
    monkeypatch.setattr(attn, "call_with_value_head_dim",
                        lambda *a, **kw: pytest.fail("padded instead of the DV kernel"))
    o, lse = tessel.attention(q, k, v, causal=causal, enable_gqa=True, return_lse=True)
    kernel = tessel.compile_attention(q, k, v, causal=causal, enable_gqa=True)
    assert {i[0]: i[-1] for i in kernel.specialization}["DV"] == Ev
    s = q.astype(np.float64) @ np.repeat(k, 2, axis=1).swapaxes(-1, -2) / np.sqrt(E)
    if causal:
        s = np.where(np.tril(np.ones((37, 50), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = (p / p.sum(-1, keepdims=True)) @ np.repeat(v, 2, axis=1)
    assert o.shape == (2, 2, 37, Ev) and np.abs(o - ref).max() < 1e-5
    assert np.abs(o - padded).max() < 1e-6
    assert np.abs(lse - np.log(np.exp(s - s.max(-1, keepdims=True)).sum(-1))
                  - s.max(-1)).max() < 1e-5


def test_value_head_dim_example_runs():
    """examples/python/value_head_dim.py (q/k 192, v 128) prints its error against float64."""
    import pathlib
    import subprocess
    import sys
    examples = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"
    r = subprocess.run([sys.executable, "value_head_dim.py"], capture_output=True, text=True,
                       timeout=300, cwd=examples)
    assert r.returncode == 0, r.stderr
    assert float(r.stdout.rsplit("=", 1)[1]) < 1e-5, r.stdout


def _window_of_5(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx < 5)


@pytest.mark.parametrize("causal,even,window", [(False, False, False), (True, False, False),
                                                (False, True, False), (False, False, True)],
                         ids=["ragged", "causal", "even", "window"])
def test_blocks_wider_than_the_head_dim(causal, even, window):
    # attention_kernel's DB on the interpreter (what attention.BLOCK_HEAD_DIM_CHIPS gives a CUDA
    # call at head dim 96, 80 or 40; with a mask_mod, BLOCK_HEAD_DIM_MASKS): head dim 24 read
    # in blocks 32 wide, columns past 24 as 0, o stored 24 wide, GQA — float64's answer, and
    # the padded call's within float32 rounding. A DB narrower than D fails it.
    attention_module = importlib.import_module("tessel.attention")
    rng = np.random.default_rng(7 + causal + 2 * even)
    Nk = 64 if even else 50
    q = rng.standard_normal((1, 4, 40, 24)).astype(np.float32)
    k, v = (rng.standard_normal((1, 2, Nk, 24)).astype(np.float32) for _ in range(2))
    mask_mod = tessel.jit(_window_of_5) if window else None
    args, cx, grid, o, lse = attention_module._prepare(q, k, v, causal, None, None, mask_mod,
                                                       True, 16, 16)
    assert cx["EVEN_N"] == even
    attention_module.attention_kernel[grid](*args, **cx, DB=32)
    ro, rl = reference_attention(q, k, v, causal=causal, enable_gqa=True, allowed=(
        (lambda b, h, i, j: (i >= j) & (i - j < 5)) if window else None))
    assert o.shape == q.shape and max_rel_error(o, ro) < 2e-5
    np.testing.assert_allclose(lse, rl, rtol=1e-5, atol=1e-5)
    padded = tessel.attention(*(np.pad(x, [(0, 0)] * 3 + [(0, 8)]) for x in (q, k, v)),
                              causal=causal, scale=24 ** -0.5, enable_gqa=True, block_m=16,
                              block_n=16, mask_mod=mask_mod)
    np.testing.assert_allclose(o, padded[..., :24], rtol=1e-5, atol=1e-6)
