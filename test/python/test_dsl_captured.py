"""Tensors captured by score_mod / mask_mod (and @tessel.jit kernels) from globals and closures
(issue 13, first half): kernel arguments read with tile.gather, not constants; checked against
float64 numpy references on the interpreter."""
import types

import numpy as np
import pytest

from dsl_helpers import assert_located
import tessel
from tessel import _tessel
from tessel import language as tl
from tessel.attention import attention_kernel
from tessel.reference import max_rel_error, reference_attention, reference_attention_backward

pytestmark = pytest.mark.skipif(not _tessel.has_interpreter,
                                reason="this build has no interpreter")

B, H, D = 2, 2, 16


def qkv(N, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((B, H, N, D)).astype(np.float32) for _ in range(3))


def documents(N, lengths, seed=0):
    """[B, N] int32 document ids: batch b is cut into documents of the given lengths (shuffled
    per batch by the seed)."""
    rng = np.random.default_rng(seed)
    out = np.zeros((B, N), np.int32)
    for b in range(B):
        cuts = np.cumsum(rng.permutation(lengths))[:-1]
        out[b] = np.searchsorted(cuts, np.arange(N), side="right")
    return out


@pytest.fixture
def compiles(monkeypatch):
    """The number of traces attention_kernel makes during the test."""
    count = [0]
    original = attention_kernel.compile

    def counting(*args, **kwargs):
        count[0] += 1
        return original(*args, **kwargs)
    monkeypatch.setattr(attention_kernel, "compile", counting)
    return count


# ---- the document mask, from a global -------------------------------------------------------

DOC = documents(37, [10, 20, 7])


def document_mask(b, h, q_idx, kv_idx):
    return DOC[b, q_idx] == DOC[b, kv_idx]


def allowed_by(doc):
    return lambda b, h, qi, ki: doc[b][qi] == doc[b][ki]


@pytest.mark.parametrize("causal", [False, True])
def test_document_mask_from_a_global_tensor(causal):
    q, k, v = qkv(37)
    o, lse = tessel.attention(q, k, v, causal=causal, mask_mod=document_mask, return_lse=True,
                              block_m=16, block_n=16)      # 37: three blocks, the last partial
    ref_o, ref_lse = reference_attention(q, k, v, causal=causal, allowed=allowed_by(DOC))
    assert max_rel_error(o, ref_o) < 1e-5
    assert max_rel_error(lse, ref_lse) < 1e-5


def test_new_values_of_a_global_reuse_the_kernel(compiles):
    global DOC
    q, k, v = qkv(37)
    saved = DOC
    try:
        for seed in range(3):
            DOC = documents(37, [5, 12, 20], seed=seed)
            o = tessel.attention(q, k, v, mask_mod=document_mask, block_m=16, block_n=16)
            ref, _ = reference_attention(q, k, v, allowed=allowed_by(DOC))
            assert max_rel_error(o, ref) < 1e-5, seed
            first = compiles[0] if seed == 0 else first   # 0 if an earlier test traced it
        assert compiles[0] == first
        # Another dtype is another kernel: the signature (dtype, rank), not the data, is keyed.
        DOC = DOC.astype(np.int64)
        tessel.attention(q, k, v, mask_mod=document_mask, block_m=16, block_n=16)
        traced = compiles[0]
        assert traced >= 1
        DOC = DOC + 1
        tessel.attention(q, k, v, mask_mod=document_mask, block_m=16, block_n=16)
        assert compiles[0] == traced
    finally:
        DOC = saved


# ---- closures: a new function per call, FlexAttention's habit ---------------------------------

def make_document_mask(doc):
    def mask(b, h, q_idx, kv_idx):
        return doc[b, q_idx] == doc[b, kv_idx]
    return mask


def test_closures_over_new_tensors_reuse_the_kernel_and_read_their_own(compiles):
    q, k, v = qkv(40)
    for seed in range(3):
        doc = documents(40, [3, 17, 20], seed=seed)
        o = tessel.attention(q, k, v, causal=True, mask_mod=make_document_mask(doc),
                             block_m=16, block_n=16)
        ref, _ = reference_attention(q, k, v, causal=True, allowed=allowed_by(doc))
        assert max_rel_error(o, ref) < 1e-5, seed
    assert compiles[0] == 1


def test_the_cache_holds_no_captured_tensor():
    import gc
    import weakref
    doc = documents(20, [10, 10])
    alive = weakref.ref(doc)
    q, k, v = qkv(20)
    tessel.attention(q, k, v, mask_mod=make_document_mask(doc))
    del doc
    gc.collect()
    assert alive() is None


# ---- a learned relative-position bias ---------------------------------------------------------

N_BIAS = 29
REL = np.random.default_rng(3).standard_normal((H, 2 * N_BIAS - 1)).astype(np.float32)


def relative_bias(score, b, h, q_idx, kv_idx):
    return score + REL[h, q_idx - kv_idx + N_BIAS - 1]


@pytest.mark.parametrize("causal", [False, True])
def test_relative_position_bias_from_a_tensor(causal):
    q, k, v = qkv(N_BIAS, seed=1)
    o, lse = tessel.attention(q, k, v, causal=causal, score_mod=relative_bias,
                              return_lse=True, block_m=16, block_n=16)
    ref_o, ref_lse = reference_attention(
        q, k, v, causal=causal, score=lambda s, b, h, qi, ki: s + REL[h][qi - ki + N_BIAS - 1])
    assert max_rel_error(o, ref_o) < 1e-5
    assert max_rel_error(lse, ref_lse) < 1e-5


def test_float64_and_float16_tables():
    q, k, v = qkv(20, seed=2)
    for table in (REL.astype(np.float64), REL.astype(np.float16)):
        bias = make_bias(table)
        o = tessel.attention(q, k, v, score_mod=bias)
        ref, _ = reference_attention(
            q, k, v, score=lambda s, b, h, qi, ki: s + table.astype(np.float32)[h][
                qi - ki + N_BIAS - 1].astype(np.float64))
        assert max_rel_error(o, ref) < 1e-5, table.dtype


def make_bias(table):
    return lambda score, b, h, q_idx, kv_idx: score + table[h, q_idx - kv_idx + N_BIAS - 1]


SLOPES = np.array([0.5, 0.25], np.float32)          # one per head: a scalar read per program


def alibi(score, b, h, q_idx, kv_idx):
    return score + SLOPES[h] * (kv_idx - q_idx)


def test_a_per_head_scalar_read_broadcasts():
    q, k, v = qkv(30, seed=12)
    o = tessel.attention(q, k, v, causal=True, score_mod=alibi)
    ref, _ = reference_attention(q, k, v, causal=True,
                                 score=lambda s, b, h, qi, ki: s + SLOPES[h] * (ki - qi))
    assert max_rel_error(o, ref) < 1e-5


# ---- out-of-range indices, rows with no key, bool and int64 tensors ----------------------------

def test_out_of_range_indices_read_zero():
    # The table covers only kv_idx <= q_idx (q - kv >= 0) and only 10 of 20 positions: negative
    # and past-the-end indices read 0, never another element or another row.
    q, k, v = qkv(20, seed=4)
    table = np.random.default_rng(5).standard_normal((H, 10)).astype(np.float32)
    o = tessel.attention(q, k, v, score_mod=lambda s, b, h, qi, ki: s + table[h, qi - ki])
    padded = np.concatenate([table, np.zeros((H, 30), np.float32)], axis=1)

    def ref_score(s, b, h, qi, ki):
        d = qi - ki
        return s + np.where(d >= 0, padded[h][np.clip(d, 0, 39)], 0.0)
    ref, _ = reference_attention(q, k, v, score=ref_score)
    assert max_rel_error(o, ref) < 1e-5


def test_rows_with_no_visible_key_give_zero_and_minus_infinity():
    # A bool tensor of allowed (query, key) pairs; queries 3 and 11 see no key at all.
    N = 21
    rng = np.random.default_rng(6)
    allowed = rng.random((B, H, N, N)) < 0.4
    allowed[:, :, [3, 11], :] = False
    q, k, v = qkv(N, seed=7)
    o, lse = tessel.attention(q, k, v, return_lse=True, block_m=16, block_n=16,
                              mask_mod=lambda b, h, qi, ki: allowed[b, h, qi, ki])
    ref_o, ref_lse = reference_attention(q, k, v, allowed=lambda b, h, qi, ki: allowed[b, h][qi, ki])
    assert max_rel_error(o, ref_o) < 1e-5
    assert np.all(o[:, :, [3, 11]] == 0)
    assert np.all(np.isneginf(lse[:, :, [3, 11]]))
    assert np.allclose(lse[np.isfinite(ref_lse)], ref_lse[np.isfinite(ref_lse)], atol=1e-5)


def test_a_bool_tensor_read_is_a_boolean():
    flags = np.array([True, False, True, True, False, True, False, True], dtype=bool)
    out = np.zeros(8, np.int32)

    @tessel.jit
    def read_flags(out, n):
        d = tl.make_desc(out, shape=(n,), strides=(1,))
        f = flags[tl.arange(0, 16)]                 # past 8: out of range, False
        assert f.dtype == tl.int1
        tl.store(d, (0,), tl.where(f, 1, 0) + tl.where(f & (tl.arange(0, 16) >= 8), 100, 0))
    read_flags[(1,)](out, 8)
    assert np.array_equal(out, flags.astype(np.int32))


def test_int64_ids_are_narrowed_after_a_check():
    q, k, v = qkv(24, seed=8)
    doc = documents(24, [12, 12]).astype(np.int64) + 2 ** 31 - 5     # fits in int32
    o = tessel.attention(q, k, v, mask_mod=make_document_mask(doc))
    ref, _ = reference_attention(q, k, v, allowed=allowed_by(doc))
    assert max_rel_error(o, ref) < 1e-5
    doc[1, 5] = 2 ** 31
    with pytest.raises(tessel.CompilationError) as err:
        tessel.attention(q, k, v, mask_mod=make_document_mask(doc))
    assert "int64 with values in" in err.value.message and "do not fit in int32" in err.value.message
    assert err.value.filename == __file__


# ---- plain @tessel.jit kernels ------------------------------------------------------------------

TABLE = np.arange(10, dtype=np.float32) * 10


@tessel.jit
def lookup(idx, out, n):
    i = tl.load(tl.make_desc(idx, shape=(n,), strides=(1,)), (0,), shape=(16,))
    tl.store(tl.make_desc(out, shape=(n,), strides=(1,)), (0,), TABLE[i] + TABLE.shape[0])


def test_a_kernel_reads_a_global_table_anew_at_each_call(monkeypatch):
    global TABLE
    idx = np.array([0, 3, 9, 10, -1, 2], np.int32)          # 10 and -1 are out of range
    out = np.zeros(6, np.float32)
    saved = TABLE
    try:
        lookup[(1,)](idx, out, 6)
        assert np.array_equal(out, [10, 40, 100, 10, 10, 30])
        calls = [0]
        original = lookup.compile
        monkeypatch.setattr(lookup, "compile",
                            lambda *a, **kw: calls.__setitem__(0, calls[0] + 1) or original(*a, **kw))
        TABLE = np.arange(12, dtype=np.float32)               # another shape, same signature
        lookup[(1,)](idx, out, 6)
        assert np.array_equal(out, [12, 15, 21, 22, 12, 14])
        assert calls[0] == 0
    finally:
        TABLE = saved


# ---- errors, located at the user's code ---------------------------------------------------------

def test_an_unsupported_dtype_is_located_at_the_read():
    table = np.zeros((4,), np.complex64)
    q, k, v = qkv(8)
    with pytest.raises(tessel.CompilationError) as err:
        tessel.attention(q, k, v, score_mod=lambda s, b, h, qi, ki: s + table[qi])  # complex
    assert_located(err.value, __file__, "complex", "table", "captured tensor 'table' has dtype "
                   "complex64; captured tensors may be bool")


def test_wrong_number_of_indices_is_located():
    q, k, v = qkv(8)
    with pytest.raises(tessel.CompilationError) as err:
        tessel.attention(q, k, v, mask_mod=lambda b, h, qi, ki: DOC[qi] == 0)  # rank
    assert_located(err.value, __file__, "rank", "DOC[qi]",
                   "'DOC' is a rank-2 tensor: index it with 2 indices (one per axis), not 1")


def test_slices_and_bare_tensors_are_located():
    q, k, v = qkv(8)
    with pytest.raises(tessel.CompilationError) as err:
        tessel.attention(q, k, v, mask_mod=lambda b, h, qi, ki: DOC[b, :] == 0)  # slice
    assert_located(err.value, __file__, "slice", "DOC[b, :]", "read element by element")
    with pytest.raises(tessel.CompilationError) as err:
        tessel.attention(q, k, v, score_mod=lambda s, b, h, qi, ki: s + REL)  # bare
    assert_located(err.value, __file__, "bare", "s + REL", "cannot be the captured tensor 'REL'")
    with pytest.raises(tessel.CompilationError) as err:
        tessel.attention(q, k, v, score_mod=lambda s, b, h, qi, ki: s + REL[h, s])  # float index
    assert_located(err.value, __file__, "float index", "s])", "must be an integer")
    with pytest.raises(tessel.CompilationError) as err:
        tessel.attention(q, k, v, mask_mod=lambda b, h, qi, ki: DOC[b, DOC] == 0)  # nested
    assert_located(err.value, __file__, "nested", "DOC] ==",
                   "an index of 'DOC' must be an integer, not a captured rank-2 int32 tensor")


def test_a_host_tensor_in_a_gpu_launch_is_located():
    out = tessel.DevicePointer(0x1000, "f32")
    with pytest.raises(tessel.CompilationError) as err:
        lookup.warmup(tessel.DevicePointer(0x2000, "i32"), out, 6)
    assert isinstance(err.value, TypeError)
    assert "captured tensor 'TABLE' is a numpy array, but the kernel runs on the GPU" \
        in err.value.message
    assert err.value.filename == __file__


# ---- module attributes, the backward --------------------------------------------------------

tables = types.ModuleType("tables")          # a user module holding a tensor as an attribute
tables.REL = REL


def bias_from_module(score, b, h, q_idx, kv_idx):
    return score + tables.REL[h, q_idx - kv_idx + N_BIAS - 1]


def test_a_module_attribute_is_read_anew_at_each_call(compiles):
    q, k, v = qkv(N_BIAS, seed=9)
    saved = tables.REL
    try:
        for scale in (1.0, -2.0):
            tables.REL = saved * scale
            o = tessel.attention(q, k, v, score_mod=bias_from_module)
            ref, _ = reference_attention(q, k, v, score=lambda s, b, h, qi, ki: s + tables.REL[h][
                qi - ki + N_BIAS - 1])
            assert max_rel_error(o, ref) < 1e-5, scale
        assert compiles[0] == 1
    finally:
        tables.REL = saved


def test_the_backward_reads_the_captured_bias():
    q, k, v = qkv(N_BIAS, seed=10)
    do = np.random.default_rng(11).standard_normal(q.shape).astype(np.float32)
    o, lse = tessel.attention(q, k, v, causal=True, score_mod=relative_bias, return_lse=True)
    grads = tessel.attention_backward(q, k, v, o, lse, do, causal=True, score_mod=relative_bias)
    ref = reference_attention_backward(
        q, k, v, do, causal=True, score=lambda s, b, h, qi, ki: s + REL[h][qi - ki + N_BIAS - 1],
        score_grad=lambda s, b, h, qi, ki: np.ones_like(s))
    for got, want in zip(grads, ref):
        assert max_rel_error(got, want) < 1e-5


@tessel.jit
def jit_document_mask(b, h, q_idx, kv_idx):
    return DOC[b, q_idx] == DOC[b, kv_idx]


def test_aot_refuses_a_mask_that_reads_a_tensor():
    from tessel import aot
    module = types.ModuleType("dsl_file")
    module.__file__ = __file__
    module.attention_kernel = attention_kernel
    module.jit_document_mask = jit_document_mask
    spec = aot.parse_spec("dtype=f16,head_dim=64,chip=sm_80,mask=jit_document_mask")
    with pytest.raises(ValueError, match="reads captured tensors \\(DOC\\): AOT libraries"):
        aot.trace(module, spec)
