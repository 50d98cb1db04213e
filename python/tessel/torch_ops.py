"""tessel's attention entry points under torch.compile: torch.library custom ops.

TorchDynamo traces a compiled function's Python into a graph. tessel's entry points run host
code it cannot trace (numpy views of tensors, kernel caches, driver calls), so a compiled model
broke its graph at every tessel call, and ``fullgraph=True`` failed. While Dynamo traces, the
entry points call custom ops instead (`compiling`; the ops: torch_op_defs.py): one node each
in the graph, a fake implementation that gives the outputs' shapes, dtypes and strides to
FakeTensor propagation (symbolic sizes included), and autograd through the matching backward
op. The real implementations are the eager entry points, so a compiled call computes what an
eager one does.

score_mod and mask_mod ride in the dense ops as an int key (torch_mods.py, entered at trace
time), the tensors of their closures and a block_mask's lists as op inputs. Calls an op cannot
carry (mods that read tensors otherwise, FP8 inputs) run outside the graph: `outside_graph`
calls the eager function through torch.compiler.disable (one graph break, autograd as in eager;
``fullgraph=True`` refuses them). docs/torch-compile.md is the user's page.

The ops are registered when tessel is imported after torch, else right after `import torch`
(a meta path finder): tessel never imports torch itself, and Dynamo cannot trace a
registration.
"""
import sys

from . import torch_mods
from . import torch_op_defs

_ops = None             # the registered ops (a namespace), once torch is there
_is_compiling = None    # torch.compiler.is_compiling, bound once (the eager path's only cost)


def compiling(x):
    """Whether Dynamo is tracing a call whose first tensor is x: the entry points then go
    through the ops. Eager calls pay one bound call (~0.1 us)."""
    if _is_compiling is None:
        torch = sys.modules.get("torch")
        if torch is None or not isinstance(x, torch.Tensor):
            return False
        _bind_is_compiling(torch)
    return _is_compiling()


def _bind_is_compiling(torch):
    global _is_compiling
    _is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or \
        (lambda: False)                 # (a torch without torch.compiler compiles nothing)


class _AfterTorchImport:
    """A meta path finder that registers the ops once `import torch` has run (tessel imported
    first): Dynamo cannot trace their registration, so it must not wait for a traced call. It
    stays on sys.meta_path until torch has been executed (a find_spec that only asks whether
    torch is installed must not use it up)."""

    looking = False

    def find_spec(self, fullname, path, target=None):
        if fullname != "torch" or self.looking:
            return None
        import importlib.util
        self.looking = True
        try:
            spec = importlib.util.find_spec("torch")    # the other finders' spec
        finally:
            self.looking = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            register()                  # (never raises: a torch it cannot use warns)
        spec.loader.exec_module = exec_module
        return spec


def register_when_torch_imports():
    """The ops now if torch is imported, else right after it is."""
    if "torch" in sys.modules:
        register()
    elif not any(isinstance(f, _AfterTorchImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterTorchImport())


def outside_graph(fn, *args, **kwargs):
    """fn(*args, **kwargs) run eagerly, outside the compiled graph (a graph break)."""
    torch = sys.modules["torch"]
    return torch.compiler.disable(fn, recursive=True)(*args, **kwargs)


def _window(window_size):
    """window_size as the ops' int list (None: no window)."""
    return None if window_size is None else [int(w) for w in window_size]


def register():
    """The ops' namespace, defined on the first call; None where this torch cannot define them
    (torch.library.custom_op came with torch 2.4): the entry points then run outside the
    graph, and one warning says why."""
    global _ops
    if _ops is None:
        # Bound before any trace: a trace that bound it would leave a guard on the global being
        # None, and the next call would compile the function again.
        _bind_is_compiling(sys.modules["torch"])
        try:
            _ops = torch_op_defs.define()
            torch_mods.bind(sys.modules["torch"])
        except Exception as e:
            _ops = False
            if hasattr(sys.modules["torch"], "library"):   # (not a stand-in torch of tests)
                import warnings
                warnings.warn(f"tessel: no torch.compile ops with this torch ({e}); tessel "
                              "calls in compiled code run outside the graph")
    return _ops or None


def block_inputs(bm):
    """(lists, meta) of a block_mask as the ops take it ([] and [] for none): its lists as
    tensors (numpy arrays, the interpreter's, seen as tensors of the same memory, by which the
    op finds the BlockMask again: blocksparse.live_block_mask) and [B, H, Nq, Nk, BLOCK_M,
    BLOCK_N, layout] (-1 for a broadcast B or H; layout 1: FlexAttention's BlockMask, taken
    over in the op); (None, None) for anything else (the eager call's error, outside the
    graph)."""
    from .blocksparse import BlockMask, lists_of
    from .flex import flex_lists, is_flex_block_mask
    if bm is None:
        return [], []
    if is_flex_block_mask(bm):
        return flex_lists(bm)
    if not isinstance(bm, BlockMask):
        return None, None
    torch = sys.modules["torch"]
    lists = [x if isinstance(x, torch.Tensor) else torch.as_tensor(x) for x in lists_of(bm)]
    B, H, Nq, Nk = bm.shape
    return lists, [-1 if B is None else B, -1 if H is None else H, Nq, Nk, bm.BLOCK_M,
                   bm.BLOCK_N, 0]


def _needs_grad(*tensors):
    return any(t is not None and t.requires_grad for t in tensors) and \
        sys.modules["torch"].is_grad_enabled()


def attention(q, k, v, causal, scale, score_mod, mask_mod, enable_gqa, return_lse, block_m,
              block_n, block_mask, deterministic, descale_q, descale_k, descale_v, out_dtype,
              window_size, softcap, alibi_slopes):
    """tessel.attention while Dynamo traces: the op where its arguments fit one, else the eager
    call outside the graph."""
    from .attention import attention as eager
    ops = register()
    mods, captured = torch_mods.traced_key(score_mod, mask_mod) if ops is not None else (-1, [])
    lists, meta = block_inputs(block_mask)
    if mods < 0 or lists is None or _needs_grad(*captured) or \
            any(x is not None for x in (descale_q, descale_k, descale_v, out_dtype)) or \
            q.element_size() == 1:      # (FP8: its descales and output dtype)
        return outside_graph(eager, q, k, v, causal=causal, scale=scale,
                             score_mod=score_mod, mask_mod=mask_mod, enable_gqa=enable_gqa,
                             return_lse=return_lse, block_m=block_m, block_n=block_n,
                             block_mask=block_mask, deterministic=deterministic,
                             descale_q=descale_q, descale_k=descale_k, descale_v=descale_v,
                             out_dtype=out_dtype, window_size=window_size, softcap=softcap,
                             alibi_slopes=alibi_slopes)
    o, lse = ops.attention(q, k, v, bool(causal), scale, bool(enable_gqa), block_m, block_n,
                           bool(deterministic), _window(window_size), softcap, alibi_slopes,
                           mods, captured, lists, meta)
    return (o, lse) if return_lse else o


def attention_backward(q, k, v, o, lse, do, causal, scale, score_mod, mask_mod, enable_gqa,
                       dlse, block_m, block_n, block_mask, deterministic, window_size, softcap,
                       alibi_slopes):
    """tessel.attention_backward while Dynamo traces (the backward's own blocks: block_m and
    block_n are taken outside the graph, as the mods)."""
    ops = register()
    mods, captured = torch_mods.traced_key(score_mod, mask_mod) if ops is not None else (-1, [])
    lists, meta = block_inputs(block_mask)
    if mods < 0 or lists is None or _needs_grad(*captured) or block_m is not None or \
            block_n is not None:
        from .backward import attention_backward as eager
        return outside_graph(eager, q, k, v, o, lse, do, causal=causal, scale=scale,
                             score_mod=score_mod, mask_mod=mask_mod, enable_gqa=enable_gqa,
                             dlse=dlse, block_m=block_m, block_n=block_n,
                             block_mask=block_mask, deterministic=deterministic,
                             window_size=window_size, softcap=softcap,
                             alibi_slopes=alibi_slopes)
    return ops.attention_backward(q, k, v, o, lse, do, dlse, bool(causal), scale,
                                  bool(enable_gqa), bool(deterministic), _window(window_size),
                                  softcap, alibi_slopes, mods, captured, lists, meta)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
                     scale, return_lse, block_m, block_n, window_size, softcap, alibi_slopes,
                     block_table, seqused_k):
    """tessel.attention_varlen while Dynamo traces (block_table with gradients: the eager
    call's refusal, outside the graph)."""
    ops = register()
    if ops is None or (block_table is not None and _needs_grad(q, k, v)):
        from .serving import attention_varlen as eager
        return outside_graph(eager, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                             max_seqlen_k, causal=causal, scale=scale, return_lse=return_lse,
                             block_m=block_m, block_n=block_n, window_size=window_size,
                             softcap=softcap, alibi_slopes=alibi_slopes,
                             block_table=block_table, seqused_k=seqused_k)
    o, lse = ops.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q),
                                  int(max_seqlen_k), bool(causal), scale, block_m, block_n,
                                  _window(window_size), softcap, alibi_slopes, block_table,
                                  seqused_k)
    return (o, lse) if return_lse else o


def attention_with_kvcache(q, k_cache, v_cache, cache_seqlens, block_table, causal, scale,
                           return_lse, block_m, block_n, num_splits, window_size, softcap,
                           alibi_slopes, k, v, rotary_cos, rotary_sin, rotary_interleaved,
                           cache_batch_idx, cache_leftpad):
    """tessel.attention_with_kvcache while Dynamo traces: the append op where k and v are
    given (the caches written in place), else the reading one; inputs that require grad go to
    the eager call's refusal."""
    torch = sys.modules["torch"]
    ops = register()
    if ops is None or _needs_grad(q, k_cache, v_cache, k, v):
        from .serving import attention_with_kvcache as eager
        return outside_graph(eager, q, k_cache, v_cache, cache_seqlens, block_table,
                             causal=causal, scale=scale, return_lse=return_lse, block_m=block_m,
                             block_n=block_n, num_splits=num_splits, window_size=window_size,
                             softcap=softcap, alibi_slopes=alibi_slopes, k=k, v=v,
                             rotary_cos=rotary_cos, rotary_sin=rotary_sin,
                             rotary_interleaved=rotary_interleaved,
                             cache_batch_idx=cache_batch_idx, cache_leftpad=cache_leftpad)
    if not isinstance(cache_seqlens, torch.Tensor):        # one length for the whole batch
        cache_seqlens = torch.full((q.shape[0],), int(cache_seqlens), dtype=torch.int32,
                                   device=q.device)
    op = ops.attention_with_kvcache if k is None and v is None else \
        ops.attention_with_kvcache_append
    o, lse = op(q, k_cache, v_cache, cache_seqlens, block_table, bool(causal), scale, block_m,
                block_n, num_splits, _window(window_size), softcap, alibi_slopes, k, v,
                rotary_cos, rotary_sin, bool(rotary_interleaved), cache_batch_idx, cache_leftpad)
    return (o, lse) if return_lse else o


def sdpa(q, k, v, mask, causal, scale, enable_gqa):
    """tessel.scaled_dot_product_attention while Dynamo traces ([B, H, N, E] inputs, the mask
    [B, H, L, S] or None): its op, the mask an input."""
    ops = register()
    if ops is None:
        from .attention import attention
        from .sdpa import mask_mods
        return outside_graph(lambda: attention(q, k, v, causal=causal, scale=scale,
                                               enable_gqa=enable_gqa, **mask_mods(mask)))
    return ops.sdpa_forward(q, k, v, mask, bool(causal), scale, bool(enable_gqa))[0]
