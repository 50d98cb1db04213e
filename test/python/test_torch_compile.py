"""tessel's entry points under torch.compile (python/tessel/torch_ops.py): one custom op each in
the graph (fullgraph=True), the same results and gradients as the eager calls and float64
attention, symbolic shapes, the strides the fake implementation promises, calls with mods
outside the graph. torch CPU tensors on the interpreter."""
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import dsl_helpers  # noqa: F401,E402 (puts the build's package on the path)
import tessel  # noqa: E402
from tessel import torch_mods, torch_ops  # noqa: E402


def _rand(*shape, seed=0, grad=True):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).requires_grad_(grad)


def _reference(q, k, v, causal=False, window=None, softcap=None, alibi=None):
    """float64 attention and its LSE (GQA by repetition; v of its own head dim)."""
    q, k, v = (x.double() for x in (q, k, v))
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    s = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(q.shape[2])[:, None]
    j = torch.arange(k.shape[2])[None, :]
    if alibi is not None:
        s = s - alibi.double()[None, :, None, None] * (i - j).abs()
    keep = torch.ones(s.shape[-2:], dtype=torch.bool)
    if causal:
        keep &= i >= j
    if window is not None:
        keep &= (j >= i - window[0]) & (j <= i + window[1])
    s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)


def _grads(fn, inputs):
    for x in inputs:
        x.grad = None
    out = fn(*inputs)
    o, lse = out if isinstance(out, tuple) else (out, None)
    g = torch.Generator().manual_seed(7)
    loss = (o * torch.randn(o.shape, generator=g)).sum()
    if lse is not None:
        loss = loss + (lse * torch.randn(lse.shape, generator=g)).sum()
    loss.backward()
    return out, [x.grad.clone() for x in inputs]


CASES = {
    "plain": dict(),
    "causal": dict(causal=True),
    "gqa": dict(causal=True, heads=(4, 2)),
    "narrow_v": dict(dv=8),
    "wide_v": dict(dv=24, causal=True),
    "flash_mods": dict(window=(6, 3), softcap=5.0, alibi=True),
    "lse": dict(lse=True, causal=True),
}


@pytest.mark.parametrize("case", CASES)
def test_fullgraph_matches_eager_and_float64(case):
    c = CASES[case]
    H, Hkv = c.get("heads", (2, 2))
    D, Dv, N = 16, c.get("dv", 16), 40
    q, k, v = _rand(1, H, N, D, seed=1), _rand(1, Hkv, N, D, seed=2), _rand(1, Hkv, N, Dv, seed=3)
    alibi = torch.rand(H) if c.get("alibi") else None
    kw = dict(causal=c.get("causal", False), enable_gqa=H != Hkv,
              window_size=c.get("window"), softcap=c.get("softcap"), alibi_slopes=alibi,
              return_lse=c.get("lse", False))

    def f(q, k, v):
        return tessel.attention(q, k, v, **kw)

    torch._dynamo.reset()
    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    out_c, grads_c = _grads(compiled, (q, k, v))
    out_e, grads_e = _grads(f, (q, k, v))
    for a, b in zip(grads_c + [out_c if torch.is_tensor(out_c) else out_c[0]],
                    grads_e + [out_e if torch.is_tensor(out_e) else out_e[0]]):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)
    # Against float64 autograd (the same loss weights: _grads' generator).
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))

    def ref(q, k, v):
        o, lse = _reference(q, k, v, kw["causal"], c.get("window"), c.get("softcap"), alibi)
        return (o, lse) if kw["return_lse"] else o
    out_r, grads_r = _grads(ref, (q64, k64, v64))
    for a, b in zip(out_c if isinstance(out_c, tuple) else (out_c,),
                    out_r if isinstance(out_r, tuple) else (out_r,)):
        torch.testing.assert_close(a.double(), b, atol=2e-5, rtol=2e-5)
    for a, b in zip(grads_c, grads_r):
        torch.testing.assert_close(a.double(), b, atol=1e-4, rtol=1e-4)


def test_one_node_and_symbolic_lengths():
    # dynamic=True: one graph for every length (the fake implementation's symbolic sizes), and
    # the graph holds the op itself, not a break around tessel's host code.
    seen = []

    def backend(gm, example_inputs):
        seen.append([n.target for n in gm.graph.nodes if n.op == "call_function"])
        return gm

    def f(q, k, v):
        return tessel.attention(q, k, v, causal=True) * 2

    torch._dynamo.reset()
    compiled = torch.compile(f, backend=backend, fullgraph=True, dynamic=True)
    for n in (40, 72, 33):
        q, k, v = (_rand(2, 2, n, 16, seed=s, grad=False) for s in range(3))
        torch.testing.assert_close(compiled(q, k, v), f(q, k, v), atol=0, rtol=0)
    assert len(seen) == 1, seen
    assert torch.ops.tessel.attention.default in seen[0]


def test_output_strides_as_promised():
    # q of FlashAttention's [B, N, H, D] seen as [B, H, N, D]: the op's o has the layout its
    # fake implementation gave the graph (and eager tessel gives), contiguous q a contiguous o.
    qb, kb, vb = (_rand(1, 24, 2, 16, seed=s, grad=False) for s in range(3))
    q, k, v = (x.transpose(1, 2) for x in (qb, kb, vb))
    ops = torch_ops.register()
    opts = (False, None, False, None, None, False, None, None, None, 0, [], [], [])
    o, lse = ops.attention(q, k, v, *opts)
    with torch._subclasses.fake_tensor.FakeTensorMode() as mode:
        fo, flse = ops.attention(*(mode.from_tensor(x) for x in (q, k, v)), *opts)
    assert o.stride() == fo.stride() == (24 * 2 * 16, 16, 2 * 16, 1)
    assert lse.stride() == flse.stride()
    torch.testing.assert_close(o, tessel.attention(q, k, v), atol=0, rtol=0)
    o2, _ = ops.attention(qb.contiguous(), kb, vb, *opts)
    assert o2.is_contiguous()


def test_opcheck():
    # torch's own check of a custom op: schema, fake against real, autograd registration.
    ops = torch_ops.register()
    q, k, v = (_rand(1, 2, 24, 16, seed=s) for s in range(3))
    opts = (True, None, False, None, None, False, None, None, None, 0, [], [], [])
    torch.library.opcheck(ops.attention, (q, k, v, *opts))
    torch.library.opcheck(ops.attention, tuple(x.detach() for x in (q, k, v)) + opts)
    o, lse = ops.attention(q.detach(), k.detach(), v.detach(), *opts)
    do = _rand(*o.shape, seed=5, grad=False)
    torch.library.opcheck(ops.attention_backward,
                          (q.detach(), k.detach(), v.detach(), o, lse, do, None, True, None,
                           False, False, None, None, None, 0, [], [], []))
    # With a closure's tensor and a block mask's lists as inputs.
    doc = torch.tensor([0] * 10 + [1] * 14)
    key, captured = torch_mods.traced_key(None, _doc_mask(doc))
    bm = tessel.block_mask(_doc_mask(doc), None, None, 24, 24, BLOCK_M=16, BLOCK_N=16, like=q)
    lists, meta = torch_ops.block_inputs(bm)
    opts = (False, None, False, None, None, False, None, None, None, key, captured, lists, meta)
    torch.library.opcheck(ops.attention, (q, k, v, *opts))


WINDOW = 5


def _bias(score, b, h, q_idx, kv_idx):
    return score - 0.1 * (q_idx - kv_idx)


def _near(b, h, q_idx, kv_idx):
    return q_idx - kv_idx <= WINDOW


def test_mods_in_the_graph():
    # score_mod and mask_mod that read no tensor ride in the op as a key (registered at trace
    # time): one graph with fullgraph=True, the eager results and gradients — module functions
    # and a lambda made inside the compiled function (a new object each call) alike.
    def f(q, k, v):
        half = 0.5
        return tessel.attention(q, k, v, score_mod=_bias, mask_mod=_near, causal=True) + \
            tessel.attention(q, k, v, score_mod=lambda s, b, h, i, j: s * half)

    q, k, v = (_rand(1, 2, 24, 16, seed=s) for s in range(3))
    torch._dynamo.reset()
    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    for _ in range(2):
        out_c, grads_c = _grads(compiled, (q, k, v))
    out_e, grads_e = _grads(f, (q, k, v))
    for a, b in zip([out_c] + grads_c, [out_e] + grads_e):
        torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_mods_over_changing_numbers():
    # A closure over a number argument: each value its own kernel, as in eager (torch.compile
    # makes the number symbolic after it changes: that call breaks the graph at the key).
    def f(q, k, v, w):
        return tessel.attention(q, k, v, score_mod=lambda s, b, h, i, j: s * w)

    q, k, v = (_rand(1, 2, 24, 16, seed=s) for s in range(3))
    torch._dynamo.reset()
    compiled = torch.compile(f, backend="aot_eager")
    for w in (0.5, 0.25, 2.0):
        out_c, grads_c = _grads(lambda *a: compiled(*a, w), (q, k, v))
        out_e, grads_e = _grads(lambda *a: f(*a, w), (q, k, v))
        for a, b in zip([out_c] + grads_c, [out_e] + grads_e):
            torch.testing.assert_close(a, b, atol=0, rtol=0)


DOC = torch.tensor([0] * 10 + [1] * 14)


def _same_doc(b, h, q_idx, kv_idx):
    return DOC[q_idx] == DOC[kv_idx]


def _doc_mask(doc):
    def same_doc(b, h, q_idx, kv_idx):
        return doc[q_idx] == doc[kv_idx]
    return same_doc


def _doc_reference(q, k, v, doc):
    s = q.double() @ k.double().transpose(-1, -2) * q.shape[-1] ** -0.5
    s = s.masked_fill(doc[:, None] != doc[None, :], float("-inf"))
    return torch.softmax(s, -1) @ v.double()


@pytest.mark.parametrize("with_block_mask", [False, True])
def test_closure_tensors_and_block_masks_in_the_graph(with_block_mask):
    # FlexAttention's document mask: a mask_mod over a closure's tensor, with or without its
    # block mask. The tensor and the block mask's lists are inputs of the op: one graph with
    # fullgraph=True, the eager results and gradients, float64's; the block mask is found again
    # (none made per call), and new document ids written in place are read by the next call.
    doc = torch.tensor([0] * 10 + [1] * 14)
    mask = _doc_mask(doc)
    bm = tessel.block_mask(mask, None, None, 24, 24, BLOCK_M=16, BLOCK_N=16,
                           like=torch.empty(0)) if with_block_mask else None
    seen = []

    def backend(gm, example_inputs):
        seen.append([n.target for n in gm.graph.nodes if n.op == "call_function"])
        return torch._dynamo.backends.debugging.aot_eager(gm, example_inputs)

    def f(q, k, v):
        return tessel.attention(q, k, v, mask_mod=mask, block_mask=bm)

    q, k, v = (_rand(1, 2, 24, 16, seed=s) for s in range(3))
    torch._dynamo.reset()
    compiled = torch.compile(f, backend=backend, fullgraph=True)
    made = []
    init = tessel.BlockMask.__init__
    try:
        tessel.BlockMask.__init__ = lambda self, *a, **kw: made.append(1) or init(self, *a, **kw)
        out_c, grads_c = _grads(compiled, (q, k, v))
    finally:
        tessel.BlockMask.__init__ = init
    assert not made
    out_e, grads_e = _grads(f, (q, k, v))
    for a, b in zip([out_c] + grads_c, [out_e] + grads_e):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
    torch.testing.assert_close(out_c.double(), _doc_reference(q, k, v, doc), atol=1e-5,
                               rtol=1e-5)
    assert len(seen) == 1 and torch.ops.tessel.attention.default in seen[0]
    doc[:] = torch.tensor([0] * 4 + [1] * 20)
    if with_block_mask:         # the block mask was made from the old ids: eager's refusal
        with pytest.raises(ValueError, match="not those the block_mask was made from"):
            compiled(q, k, v)
    else:
        torch.testing.assert_close(compiled(q, k, v).double(), _doc_reference(q, k, v, doc),
                                   atol=1e-5, rtol=1e-5)
    assert len(seen) == 1


def _causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


@pytest.mark.parametrize("entry", ["attention", "flex_attention"])
def test_and_masks_over_a_document_mask_in_the_graph(entry):
    # FlexAttention's and_masks(causal, document): the document mask's tensor sits in a
    # function inside and_masks' closure tuple. It is an input of the op all the same: one graph
    # with fullgraph=True, the eager results and gradients, float64's, and ids written in place
    # are read by the next call.
    fa = pytest.importorskip("torch.nn.attention.flex_attention")
    doc = torch.tensor([0] * 10 + [1] * 14)
    mask = fa.and_masks(_causal, _doc_mask(doc))
    seen = []

    def backend(gm, example_inputs):
        seen.append([n.target for n in gm.graph.nodes if n.op == "call_function"])
        return torch._dynamo.backends.debugging.aot_eager(gm, example_inputs)

    bm = tessel.create_block_mask(mask, None, None, 24, 24, device="cpu")

    def f(q, k, v):
        if entry == "attention":
            return tessel.attention(q, k, v, mask_mod=mask)
        return tessel.flex_attention(q, k, v, block_mask=bm)

    q, k, v = (_rand(1, 2, 24, 16, seed=s) for s in range(3))
    torch._dynamo.reset()
    compiled = torch.compile(f, backend=backend, fullgraph=True)
    out_c, grads_c = _grads(compiled, (q, k, v))
    out_e, grads_e = _grads(f, (q, k, v))
    for a, b in zip([out_c] + grads_c, [out_e] + grads_e):
        torch.testing.assert_close(a, b, atol=0, rtol=0)

    def reference(doc):
        tril = torch.ones(24, 24, dtype=torch.bool).tril()
        s = q.double() @ k.double().transpose(-1, -2) * 0.25
        s = s.masked_fill(~((doc[:, None] == doc[None, :]) & tril), float("-inf"))
        return torch.softmax(s, -1) @ v.double()
    torch.testing.assert_close(out_c.double(), reference(doc), atol=1e-5, rtol=1e-5)
    assert len(seen) == 1 and torch.ops.tessel.attention.default in seen[0]
    if entry == "attention":
        doc[:] = torch.tensor([0] * 4 + [1] * 20)
        torch.testing.assert_close(compiled(q, k, v).double(), reference(doc), atol=1e-5,
                                   rtol=1e-5)
        assert len(seen) == 1


def test_and_masks_over_a_helper_reading_a_global_tensor_stay_outside():
    # and_masks over a mod that reads a global tensor through a helper it calls by name: the
    # graph would not know the op reads it.
    fa = pytest.importorskip("torch.nn.attention.flex_attention")
    mask = fa.and_masks(_causal, _same_doc_by_helper)
    q, k, v = (_rand(1, 2, 24, 16, seed=s) for s in range(3))
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.Unsupported):
        torch.compile(lambda q: tessel.attention(q, k, v, mask_mod=mask), backend="aot_eager",
                      fullgraph=True)(q)


def test_a_closure_that_holds_itself_is_no_crash():
    # Closures are followed into the functions they hold, to a bounded depth: a mask whose
    # closure holds itself gets no key (it would run outside the graph), not a RecursionError.
    def make():
        def mask(b, h, q_idx, kv_idx):
            return q_idx >= kv_idx if mask is not None else q_idx < kv_idx
        return mask
    mask = make()
    assert torch_mods._function_parts(mask, []) is None
    assert torch_mods.mods_key(None, mask) == -1


def test_new_ids_and_block_mask_each_step():
    # A training loop's batches: new document ids, mask_mod and block mask each step, passed to
    # the compiled function. Their tensors are inputs, not constants of the graph: the results
    # follow the new ids, and the steps do not each compile a graph.
    seen = []

    def backend(gm, example_inputs):
        seen.append(gm)
        return gm

    def f(q, k, v, mask, bm):
        return tessel.attention(q, k, v, mask_mod=mask, block_mask=bm)

    compiled = torch.compile(f, backend=backend, fullgraph=True)
    q, k, v = (_rand(1, 2, 24, 16, seed=s, grad=False) for s in range(3))
    g = torch.Generator().manual_seed(3)
    torch._dynamo.reset()
    for _ in range(4):
        doc = torch.randint(0, 3, (24,), generator=g).sort().values
        mask = _doc_mask(doc)
        bm = tessel.block_mask(mask, None, None, 24, 24, BLOCK_M=16, BLOCK_N=16, like=q)
        torch.testing.assert_close(compiled(q, k, v, mask, bm).double(),
                                   _doc_reference(q, k, v, doc), atol=1e-5, rtol=1e-5)
    assert len(seen) == 1


GDOC = torch.tensor([0] * 10 + [1] * 14)


def _same_gdoc(b, h, q_idx, kv_idx):
    return GDOC[q_idx] == GDOC[kv_idx]


@pytest.mark.parametrize("entry", ["attention", "and_masks", "flex_attention"])
def test_global_tensors_in_the_graph(entry):
    # FlexAttention's document ids as a module global, read by the mask by name (alone, inside
    # and_masks, or through a BlockMask made from it): an input of the op, one graph with
    # fullgraph=True, the eager results and gradients, float64's; ids written in place are
    # read by the next call.
    fa = pytest.importorskip("torch.nn.attention.flex_attention")
    saved = GDOC.clone()
    mask = fa.and_masks(_causal, _same_gdoc) if entry == "and_masks" else _same_gdoc
    causal = entry == "and_masks"
    bm = fa.create_block_mask(mask, None, None, 24, 24, device="cpu", BLOCK_SIZE=16) \
        if entry == "flex_attention" else None
    seen = []

    def backend(gm, example_inputs):
        seen.append([n.target for n in gm.graph.nodes if n.op == "call_function"])
        return torch._dynamo.backends.debugging.aot_eager(gm, example_inputs)

    def f(q, k, v):
        if bm is not None:
            return tessel.flex_attention(q, k, v, block_mask=bm)
        return tessel.attention(q, k, v, mask_mod=mask)

    def reference(q, k, v):
        allowed = GDOC[:, None] == GDOC[None, :]
        if causal:
            allowed = allowed & torch.ones(24, 24, dtype=torch.bool).tril()
        s = (q.double() @ k.double().transpose(-1, -2) * 0.25).masked_fill(~allowed,
                                                                             float("-inf"))
        return torch.softmax(s, -1) @ v.double()

    q, k, v = (_rand(1, 2, 24, 16, seed=s) for s in range(3))
    torch._dynamo.reset()
    compiled = torch.compile(f, backend=backend, fullgraph=True)
    try:
        out_c, grads_c = _grads(compiled, (q, k, v))
        out_e, grads_e = _grads(f, (q, k, v))
        for a, b in zip([out_c] + grads_c, [out_e] + grads_e):
            torch.testing.assert_close(a, b, atol=0, rtol=0)
        torch.testing.assert_close(out_c.double(), reference(q, k, v), atol=1e-5, rtol=1e-5)
        assert len(seen) == 1 and torch.ops.tessel.attention.default in seen[0]
        if bm is None:
            GDOC[:] = torch.tensor([0] * 4 + [1] * 20)
            torch.testing.assert_close(compiled(q, k, v).double(), reference(q, k, v),
                                       atol=1e-5, rtol=1e-5)
            assert len(seen) == 1
    finally:
        GDOC[:] = saved


def test_a_global_written_in_the_graph_is_read_by_the_op():
    # The compiled function writes the global ids, then attends: functionalization hands the
    # op the written values before they reach the module's tensor, and the op reads what it is
    # handed (ModFunction.overrides), as eager reads the written tensor.
    saved = GDOC.clone()

    def f(q, k, v, ids):
        GDOC.copy_(ids)
        return tessel.attention(q, k, v, mask_mod=_same_gdoc)

    q, k, v = (_rand(1, 2, 24, 16, seed=s, grad=False) for s in range(3))
    torch._dynamo.reset()
    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    try:
        for ids in (torch.tensor([0] * 4 + [1] * 20), torch.tensor([0] * 16 + [1] * 8)):
            out = compiled(q, k, v, ids)
            torch.testing.assert_close(out.double(), _doc_reference(q, k, v, ids), atol=1e-5,
                                       rtol=1e-5)
            assert torch.equal(GDOC, ids)
    finally:
        GDOC[:] = saved


def _compiled_with_mask():
    """tessel.attention(q, k, v, mask_mod=mask) compiled with fullgraph=True (Dynamo reset),
    and the list of the graphs its backend is handed."""
    seen = []

    def backend(gm, example_inputs):
        seen.append(gm)
        return gm

    def f(q, k, v, mask):
        return tessel.attention(q, k, v, mask_mod=mask)
    torch._dynamo.reset()
    return torch.compile(f, backend=backend, fullgraph=True), seen


def test_new_and_masks_each_step_one_graph_one_trace():
    # and_masks(causal, document_mask(ids)) made anew each step and passed in: one graph, and
    # one kernel trace for all steps (the op rebuilds the mod around each step's ids: its
    # kernel is found by content, the ids read from the step's own functions).
    fa = pytest.importorskip("torch.nn.attention.flex_attention")
    from tessel.attention import attention_kernel
    compiled, seen = _compiled_with_mask()
    q, k, v = (_rand(1, 2, 24, 16, seed=s, grad=False) for s in range(3))
    g = torch.Generator().manual_seed(4)
    traces = []
    for _ in range(3):
        doc = torch.randint(0, 3, (24,), generator=g).sort().values
        mask = fa.and_masks(_causal, _doc_mask(doc))
        tril = torch.ones(24, 24, dtype=torch.bool).tril()
        s = q.double() @ k.double().transpose(-1, -2) * 0.25
        s = s.masked_fill(~((doc[:, None] == doc[None, :]) & tril), float("-inf"))
        torch.testing.assert_close(compiled(q, k, v, mask).double(),
                                   torch.softmax(s, -1) @ v.double(), atol=1e-5, rtol=1e-5)
        traces.append(sum(len(t) for t in attention_kernel.cache.values()))
    assert len(seen) == 1 and traces[0] == traces[-1]


def test_a_default_argument_tensor_in_the_graph():
    # A mod's default-argument tensor (`doc=doc`) is an input of the op as a closure's is: one
    # graph with fullgraph=True, each step's ids read.
    compiled, seen = _compiled_with_mask()
    q, k, v = (_rand(1, 2, 24, 16, seed=s, grad=False) for s in range(3))
    g = torch.Generator().manual_seed(5)
    for _ in range(3):
        doc = torch.randint(0, 3, (24,), generator=g).sort().values
        out = compiled(q, k, v, lambda b, h, q_idx, kv_idx, doc=doc: doc[q_idx] == doc[kv_idx])
        torch.testing.assert_close(out.double(), _doc_reference(q, k, v, doc), atol=1e-5,
                                   rtol=1e-5)
    assert len(seen) == 1


def test_block_mask_under_inductor():
    # Inductor passes the graph's inputs to the op as they are: the live block mask is found.
    mask = _doc_mask(torch.tensor([0] * 10 + [1] * 14))
    q, k, v = (_rand(1, 2, 24, 16, seed=s) for s in range(3))
    bm = tessel.block_mask(mask, None, None, 24, 24, BLOCK_M=16, BLOCK_N=16, like=q)

    def f(q, k, v):
        return (tessel.attention(q, k, v, mask_mod=mask, block_mask=bm) * 2).relu()

    torch._dynamo.reset()
    out_c, grads_c = _grads(torch.compile(f, fullgraph=True), (q, k, v))
    out_e, grads_e = _grads(f, (q, k, v))
    for a, b in zip([out_c] + grads_c, [out_e] + grads_e):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)


def test_block_mask_lists_made_in_the_graph():
    # Lists the graph itself made (here: cloned) are not a live BlockMask's: the op makes one
    # around them for the call.
    mask = _doc_mask(torch.tensor([0] * 10 + [1] * 14))
    q, k, v = (_rand(1, 2, 24, 16, seed=s, grad=False) for s in range(3))
    bm = tessel.block_mask(mask, None, None, 24, 24, BLOCK_M=16, BLOCK_N=16, like=q)
    lists, meta = torch_ops.block_inputs(bm)
    key, captured = torch_mods.traced_key(None, mask)
    o, _ = torch_ops.register().attention(q, k, v, False, None, False, None, None, False, None,
                                          None, None, key, captured,
                                          [x.clone() for x in lists], meta)
    torch.testing.assert_close(o, tessel.attention(q, k, v, mask_mod=mask, block_mask=bm),
                               atol=0, rtol=0)


def test_score_mod_over_a_closure_tensor():
    # A bias table in a score_mod's closure (T5/ALiBi-style per-head tables): one graph, eager's
    # results and gradients for q, k, v, and float64's.
    table = torch.randn(2, 24)
    bias = lambda s, b, h, i, j: s + table[h, j]    # noqa: E731 (made outside the compiled f)

    def f(q, k, v):
        return tessel.attention(q, k, v, score_mod=bias)

    q, k, v = (_rand(1, 2, 24, 16, seed=s) for s in range(3))
    torch._dynamo.reset()
    out_c, grads_c = _grads(torch.compile(f, backend="aot_eager", fullgraph=True), (q, k, v))
    out_e, grads_e = _grads(f, (q, k, v))
    for a, b in zip([out_c] + grads_c, [out_e] + grads_e):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
    s = q.double() @ k.double().transpose(-1, -2) / 4 + table.double()[None, :, None, :]
    torch.testing.assert_close(out_c.double(), torch.softmax(s, -1) @ v.double(), atol=1e-5,
                               rtol=1e-5)


def test_captured_tensor_requiring_grad_is_refused_as_in_eager():
    bias = torch.zeros(24, requires_grad=True)

    def f(q, k, v):
        return tessel.attention(q, k, v, score_mod=lambda s, b, h, i, j: s + bias[j])

    q, k, v = (_rand(1, 2, 24, 16, seed=s) for s in range(3))
    torch._dynamo.reset()
    with pytest.raises(TypeError, match="requires grad"):
        torch.compile(f, backend="aot_eager")(q, k, v)


def _doc_of(i):
    return DOC[i]


def _same_doc_by_helper(b, h, q_idx, kv_idx):
    return _doc_of(q_idx) == _doc_of(kv_idx)


def test_mods_that_read_tensors_run_outside_the_graph():
    # A mask that reads a global tensor through a function it calls by name (a kernel argument
    # the graph would not see): the call runs eagerly (a graph break), gradients included;
    # fullgraph=True refuses it.
    def f(q, k, v):
        return tessel.attention(q, k, v, mask_mod=_same_doc_by_helper)

    assert torch_mods.mods_key(None, _same_doc) == -1          # a global tensor, not handed
    assert torch_mods.mods_key(_bias, _near) > 0
    q, k, v = (_rand(1, 2, 24, 16, seed=s) for s in range(3))
    torch._dynamo.reset()
    out_c, grads_c = _grads(torch.compile(f, backend="aot_eager"), (q, k, v))
    out_e, grads_e = _grads(f, (q, k, v))
    for a, b in zip([out_c] + grads_c, [out_e] + grads_e):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.Unsupported):
        torch.compile(f, backend="aot_eager", fullgraph=True)(q, k, v)


def test_inductor_around_the_op():
    # Inductor compiles the projections around the op into its own kernels and calls tessel's
    # op in between, on the strides the fake implementation gave.
    torch.manual_seed(0)
    proj = torch.nn.Linear(32, 3 * 32)

    def f(x):
        q, k, v = proj(x).view(1, 40, 3, 2, 16).unbind(2)
        o = tessel.attention(*(t.transpose(1, 2) for t in (q, k, v)), causal=True)
        return o.transpose(1, 2).reshape(1, 40, 32).relu()

    x = torch.randn(1, 40, 32)
    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True)
    torch.testing.assert_close(compiled(x), f(x), atol=1e-5, rtol=1e-5)


def test_first_call_traced_compiles_once():
    # A process whose first tessel call is traced: a second call reuses the graph (the check
    # for a trace was bound at registration, not by the trace, which left a guard behind).
    code = ("import torch, tessel; seen = []; "
            "f = torch.compile(lambda q: tessel.attention(q, q, q), fullgraph=True, "
            "backend=lambda gm, ex: seen.append(gm) or gm); "
            "q = torch.randn(1, 2, 8, 16); f(q); f(q); print(len(seen))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ), timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "1", (r.stdout, r.stderr[-2000:])


def test_import_order_and_no_torch_import():
    # tessel imported before torch registers its ops when torch arrives (a traced first call
    # could not), also after a find_spec that only asked whether torch is there; tessel alone
    # still does not import torch.
    code = ("import sys, importlib.util, tessel; assert 'torch' not in sys.modules; "
            "assert importlib.util.find_spec('torch'); import torch; "
            "q = torch.randn(1, 2, 8, 16); "
            "f = torch.compile(lambda q: tessel.attention(q, q, q), backend='aot_eager', "
            "fullgraph=True); "
            "torch.testing.assert_close(f(q), tessel.attention(q, q, q)); print('ok')")
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def _packed(lengths, H, D, seed, grad=True):
    total = sum(lengths)
    return _rand(total, H, D, seed=seed, grad=grad)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dv,used", [(16, None), (8, None), (16, [5, 17, 10])],
                         ids=["d16", "dv8", "seqused_k"])
def test_varlen_fullgraph_with_gradients(causal, dv, used):
    lq, lk = [5, 17, 9], [7, 17, 12]
    cu_q = torch.tensor([0, 5, 22, 31], dtype=torch.int32)
    cu_k = torch.tensor([0, 7, 24, 36], dtype=torch.int32)
    q, k = _packed(lq, 4, 16, 1), _packed(lk, 2, 16, 2)
    v = _packed(lk, 2, dv, 3)
    seqused = None if used is None else torch.tensor(used, dtype=torch.int32)

    def f(q, k, v):
        return tessel.attention_varlen(q, k, v, cu_q, cu_k, 17, 17, causal=causal,
                                       return_lse=True, seqused_k=seqused)

    torch._dynamo.reset()
    out_c, grads_c = _grads(torch.compile(f, backend="aot_eager", fullgraph=True), (q, k, v))
    out_e, grads_e = _grads(f, (q, k, v))
    for a, b in zip(list(out_c) + grads_c, list(out_e) + grads_e):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)
    for b in range(3 if used else 0):          # keys past the counts: no gradient
        assert not grads_c[1][cu_k[b] + used[b]:cu_k[b + 1]].any()
    # Each sequence against float64 (bottom-right causal: FlashAttention's); with seqused_k
    # its keys are the first used[b] of its span.
    nk = lk if used is None else used
    for b in range(3):
        qs = q[cu_q[b]:cu_q[b + 1]].transpose(0, 1)[None].double()
        ks, vs = (x[cu_k[b]:cu_k[b] + nk[b]].transpose(0, 1)[None].double() for x in (k, v))
        ks, vs = ks.repeat_interleave(2, 1), vs.repeat_interleave(2, 1)
        s = qs @ ks.transpose(-1, -2) / 4.0
        if causal:
            i = torch.arange(lq[b])[:, None] + nk[b] - lq[b]
            s = s.masked_fill(i < torch.arange(nk[b])[None, :], float("-inf"))
        o_r = torch.softmax(s, -1) @ vs
        torch.testing.assert_close(out_c[0][cu_q[b]:cu_q[b + 1]].transpose(0, 1).double(),
                                   o_r[0], atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("append", [False, True])
def test_kvcache_fullgraph(append):
    # A decode step: with k and v the caches are written in place (the append op, declared as
    # mutating them), and the compiled call leaves them as the eager call does.
    B, S, H, Hkv, D = 2, 32, 4, 2, 16
    kc, vc = (_rand(B, S, Hkv, D, seed=s, grad=False) for s in (1, 2))
    seqlens = torch.tensor([10, 20], dtype=torch.int32)
    q = _rand(B, 2, H, D, seed=3, grad=False)
    kn, vn = ((_rand(B, 2, Hkv, D, seed=s, grad=False) for s in (4, 5)) if append
              else (None, None))

    def f(q, kc, vc):
        return tessel.attention_with_kvcache(q, kc, vc, seqlens, causal=True, k=kn, v=vn,
                                             return_lse=True)

    torch._dynamo.reset()
    caches_c = (kc.clone(), vc.clone())
    o_c, lse_c = torch.compile(f, backend="aot_eager", fullgraph=True)(q, *caches_c)
    caches_e = (kc.clone(), vc.clone())
    o_e, lse_e = f(q, *caches_e)
    torch.testing.assert_close(o_c, o_e, atol=0, rtol=0)
    torch.testing.assert_close(lse_c, lse_e, atol=0, rtol=0)
    for a, b, orig in zip(caches_c, caches_e, (kc, vc)):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
        assert append == (not torch.equal(a, orig))


def test_kvcache_int_lengths_under_inductor():
    B, S, H, D = 2, 24, 2, 16
    kc, vc = (_rand(B, S, H, D, seed=s, grad=False) for s in (1, 2))
    q = _rand(B, 1, H, D, seed=3, grad=False)

    def f(q):
        return tessel.attention_with_kvcache(q * 2, kc, vc, 17).sum(-1)

    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(f, fullgraph=True)(q), f(q), atol=1e-5, rtol=1e-5)


def test_attention_backward_called_in_compiled_code():
    q, k, v = (_rand(1, 2, 24, 16, seed=s, grad=False) for s in range(3))
    o, lse = tessel.attention(q, k, v, causal=True, return_lse=True)
    do = _rand(*o.shape, seed=9, grad=False)

    def f(q, k, v, o, lse, do):
        return tessel.attention_backward(q, k, v, o, lse, do, causal=True)

    torch._dynamo.reset()
    got = torch.compile(f, backend="aot_eager", fullgraph=True)(q, k, v, o, lse, do)
    for a, b in zip(got, f(q, k, v, o, lse, do)):
        torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_ring_attention_runs_outside_the_graph(tmp_path):
    # The ring's sends and receives are not ops: under torch.compile the call runs eagerly, once
    # (world size 1 here: tessel.attention's result through the ring's code).
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0,
                            world_size=1)
    try:
        q, k, v = (_rand(1, 2, 24, 16, seed=s) for s in range(3))

        def f(q, k, v):
            return tessel.distributed.ring_attention(q, k, v, causal=True) * 2

        torch._dynamo.reset()
        out_c, grads_c = _grads(torch.compile(f, backend="aot_eager"), (q, k, v))
        out_e, grads_e = _grads(lambda *a: tessel.attention(*a, causal=True) * 2, (q, k, v))
        for a, b in zip([out_c] + grads_c, [out_e] + grads_e):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("kind", ["bool", "float", "none"])
def test_sdpa_drop_in_keeps_one_graph(kind):
    # tessel.scaled_dot_product_attention's attn_mask is an input of its op: the graph knows the
    # op reads it (a mask computed in the compiled function itself here).
    seen = []

    def backend(gm, example_inputs):
        seen.append([n.target for n in gm.graph.nodes if n.op == "call_function"])
        return gm

    def f(q, k, v, lengths):
        keep = torch.arange(29)[None, :] < lengths[:, None]          # [B, S] key padding
        mask = {"bool": keep[:, None, None, :],
                "float": torch.where(keep, 0.0, -1e4)[:, None, None, :] - 0.01 *
                torch.arange(29.0)[None, None, None, :], "none": None}[kind]
        return tessel.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                   is_causal=mask is None, enable_gqa=True)

    q = _rand(2, 4, 37, 16, seed=1)
    k, v = _rand(2, 2, 29, 16, seed=2), _rand(2, 2, 29, 8, seed=3)
    lengths = torch.tensor([29, 11])
    torch._dynamo.reset()
    compiled = torch.compile(f, backend=backend, fullgraph=True)
    out_c, grads_c = _grads(lambda *a: compiled(*a, lengths), (q, k, v))
    out_e, grads_e = _grads(lambda *a: f(*a, lengths), (q, k, v))
    for a, b in zip([out_c] + grads_c, [out_e] + grads_e):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)
    assert torch.ops.tessel.sdpa_forward.default in seen[0]


def test_mod_keys_are_the_same_in_every_process():
    # A graph compiled in another process (a cache, an export) carries the key its process
    # gave: the same pair gets the same key here, and a key never entered is an error, not
    # another pair's kernel.
    here = torch_mods.mods_key(_bias, _near)
    code = ("import sys; sys.path.insert(0, %r); import test_torch_compile as t; "
            "print(t.torch_mods.mods_key(t._bias, t._near))" % os.path.dirname(__file__))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ))
    assert r.returncode == 0, r.stderr[-2000:]
    assert int(r.stdout.split()[-1]) == here
    assert torch_mods.mods_key(_near, None) != here
    with pytest.raises(RuntimeError, match="not traced in this process"):
        torch_mods.lookup(here + 1)
