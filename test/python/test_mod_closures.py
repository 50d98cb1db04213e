"""Mods whose closures hold functions (tessel/mod_functions.py): FlexAttention's and_masks /
or_masks over document masks made anew per batch, nested combinators, and the cache keys of
mods (defaults included)."""
import numpy as np
import pytest

from dsl_helpers import random_qkv
import tessel
from tessel import _tessel
from tessel.attention import attention_kernel
from tessel.reference import max_rel_error, reference_attention

torch = pytest.importorskip("torch")
fa = pytest.importorskip("torch.nn.attention.flex_attention")

pytestmark = pytest.mark.skipif(not _tessel.has_interpreter,
                                reason="this build has no interpreter (branch interp not merged)")

N = 40


def _traces():
    return sum(len(v) for v in attention_kernel.cache.values())


def _doc_mask(doc):
    def same_doc(b, h, q_idx, kv_idx):
        return doc[q_idx] == doc[kv_idx]
    return same_doc


def _causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def _docs(rng):
    return torch.from_numpy(np.sort(rng.integers(0, 4, N))).to(torch.int32)


def _inputs():
    return random_qkv(Nq=N, D=16)


def _check(out, q, k, v, allowed):
    ref = reference_attention(q, k, v, allowed=allowed)[0]
    assert max_rel_error(np.asarray(out), ref) < 1e-5


def test_and_masks_made_per_batch_reuse_one_trace_and_read_their_own_ids():
    # A training loop's batches: new ids, a new document mask and a new and_masks each step.
    # One trace serves them all, and each call reads its own ids (a trace keyed by content
    # must not read the first batch's tensor).
    rng = np.random.default_rng(0)
    q, k, v = _inputs()
    before = None
    for step in range(4):
        doc = _docs(rng)
        out = tessel.attention(q, k, v, mask_mod=fa.and_masks(_causal, _doc_mask(doc)))
        d = doc.numpy()
        _check(out, q, k, v, lambda b, h, i, j, d=d: (d[i] == d[j]) & (i >= j))
        if step == 0:
            before = _traces()
    assert _traces() == before


def test_two_document_masks_in_one_and_masks_read_each_their_own_ids():
    # Two closures of one function over two id tensors of one signature: the same kernel
    # function at two places of the closure, each reading its own tensor.
    rng = np.random.default_rng(1)
    q, k, v = _inputs()
    d1, d2 = _docs(rng), _docs(rng)
    out = tessel.attention(q, k, v, mask_mod=fa.and_masks(_doc_mask(d1), _doc_mask(d2)))
    a, b = d1.numpy(), d2.numpy()
    _check(out, q, k, v, lambda _b, h, i, j: (a[i] == a[j]) & (b[i] == b[j]))
    # and swapped: the places, not the order of first sight, say which tensor is read
    out = tessel.attention(q, k, v, mask_mod=fa.and_masks(_doc_mask(d2), _doc_mask(d1)))
    _check(out, q, k, v, lambda _b, h, i, j: (a[i] == a[j]) & (b[i] == b[j]))


def test_nested_combinators():
    # or_masks over an and_masks: torch's own closures, held in another's closure.
    rng = np.random.default_rng(2)
    q, k, v = _inputs()
    doc = _docs(rng)

    def near(b, h, q_idx, kv_idx):
        return (q_idx - kv_idx < 3) & (kv_idx - q_idx < 3)
    mask = fa.or_masks(fa.and_masks(_causal, _doc_mask(doc)), near)
    out = tessel.attention(q, k, v, mask_mod=mask)
    d = doc.numpy()
    _check(out, q, k, v, lambda b, h, i, j: ((d[i] == d[j]) & (i >= j)) | (abs(i - j) < 3))


def test_a_score_mod_calling_a_held_helper():
    # A score_mod whose closure holds a helper that reads a tensor (per-head scales).
    q, k, v = _inputs()
    scales = torch.tensor([0.5, 2.0], dtype=torch.float32)

    def head_scale(h):
        return scales[h]

    def make(helper):
        def score(s, b, h, q_idx, kv_idx):
            return s * helper(h)
        return score
    out = tessel.attention(q, k, v, score_mod=make(head_scale))
    sc = scales.numpy()
    ref = reference_attention(q, k, v, score=lambda s, b, h, i, j: s * sc[h])[0]
    assert max_rel_error(np.asarray(out), ref) < 1e-5


def test_held_functions_without_tensors_reuse_their_trace():
    # and_masks over a lambda made per call (no tensors): one trace for equal ones, the mask of
    # each call (a closure's int is a constant of the kernel: another value, another trace).
    q, k, v = _inputs()
    counts = []
    for w in (3, 3, 5):
        out = tessel.attention(q, k, v, mask_mod=fa.and_masks(
            _causal, lambda b, h, q_idx, kv_idx: q_idx - kv_idx < w))
        _check(out, q, k, v, lambda b, h, i, j: (i - j < w) & (i >= j))
        counts.append(_traces())
    assert counts[1] == counts[0] and counts[2] == counts[0] + 1


def test_defaults_tell_mods_apart():
    # `lambda ..., w=w:` (the loop-variable idiom): same code, other defaults, other masks.
    q, k, v = _inputs()
    for w in (2, 9):
        out = tessel.attention(q, k, v, mask_mod=lambda b, h, q_idx, kv_idx, w=w:
                               (q_idx - kv_idx < w) & (q_idx >= kv_idx))
        _check(out, q, k, v, lambda b, h, i, j: (i - j < w) & (i >= j))


def test_a_default_argument_tensor_is_read_per_call():
    # `lambda ..., doc=doc:` (ids bound as a default): read at each launch like a closure's,
    # one trace for new ids of one signature.
    rng = np.random.default_rng(5)
    q, k, v = _inputs()
    counts = []
    for _ in range(3):
        doc = _docs(rng)
        out = tessel.attention(q, k, v, mask_mod=lambda b, h, q_idx, kv_idx, doc=doc:
                               doc[q_idx] == doc[kv_idx])
        d = doc.numpy()
        _check(out, q, k, v, lambda b, h, i, j: d[i] == d[j])
        counts.append(_traces())
    assert counts[0] == counts[-1]


def test_a_source_file_changed_after_import_is_a_clear_error(tmp_path, monkeypatch):
    # The trace reads the mod's source from its file: a file edited since the import (a script
    # rewritten while it runs) is a CompilationError that says so, not a bare SyntaxError.
    import importlib
    path = tmp_path / "edited_mods.py"
    path.write_text("def mask(b, h, q_idx, kv_idx):\n    return q_idx >= kv_idx\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("edited_mods")
    path.write_text("x = 1\n\n\n    )\n")
    q, k, v = _inputs()
    with pytest.raises(tessel.CompilationError, match="changed after it was imported"):
        tessel.attention(q, k, v, mask_mod=mod.mask)
