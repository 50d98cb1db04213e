"""tessel's attention entry points under torch.compile: torch.library custom ops.

TorchDynamo traces a compiled function's Python into a graph. tessel's entry points run host
code it cannot trace (numpy views of tensors, kernel caches, driver calls), so a compiled model
broke its graph at every tessel call, and ``fullgraph=True`` failed. While Dynamo traces, the
entry points call the ops below instead (`compiling`): one node each in the graph, a fake
implementation that gives the outputs' shapes, dtypes and strides to FakeTensor propagation
(symbolic sizes included), and autograd through the matching backward op. The real
implementations are the eager entry points, so a compiled call computes what an eager one does.

score_mod and mask_mod ride in the dense ops as an int key (`mods_key`, entered at trace
time). Calls an op cannot carry (mods that read tensors, block masks, FP8 inputs) run outside
the graph: `outside_graph` calls the eager function through torch.compiler.disable (one graph
break, autograd as in eager; ``fullgraph=True`` refuses them). docs/torch-compile.md is the
user's page.

The ops are registered when tessel is imported after torch, else right after `import torch`
(a meta path finder): tessel never imports torch itself, and Dynamo cannot trace a
registration.
"""
import sys


_ops = None             # the registered ops (a namespace), once torch is there
_is_compiling = None    # torch.compiler.is_compiling, bound once (the eager path's only cost)
_mods_key = None        # mods_key as Dynamo runs it at trace time (assume_constant_result)

# The ops carry a call's score_mod and mask_mod as an int: (score_mod, mask_mod) by key, 0 for
# none. A traced call's pair is entered at trace time and the graph holds its key; an entry
# lives as long as the process (one per distinct pair of functions: their code and closure
# values, as tessel.attention's own kernel cache keys them).
_MODS = {0: (None, None)}
_MOD_KEYS = {}


def compiling(x):
    """Whether Dynamo is tracing a call whose first tensor is x: the entry points then go
    through the ops. Eager calls pay one bound call (~0.1 us)."""
    global _is_compiling
    if _is_compiling is None:
        torch = sys.modules.get("torch")
        if torch is None or not isinstance(x, torch.Tensor):
            return False
        _is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or \
            (lambda: False)             # (a torch without torch.compiler compiles nothing)
    return _is_compiling()


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


def mods_key(score_mod, mask_mod):
    """The ops' key of a call's mods (each a function, a @tessel.jit function, None, or a
    function's parts: `_function_parts`), or -1 where they stay outside the graph: mods that
    read a tensor (a closure, global or module attribute: a kernel argument the graph would not
    know it depends on) or whose code cannot be looked at."""
    if score_mod is None and mask_mod is None:
        return 0
    from .attention import _fn_key
    score_mod, mask_mod = _rebuilt(score_mod), _rebuilt(mask_mod)
    if any(fn is not None and (fn is _UNKNOWN or _reads_tensors(fn))
           for fn in (score_mod, mask_mod)):
        return -1
    try:
        ident = (_fn_key(score_mod), _fn_key(mask_mod))
        key = _MOD_KEYS.get(ident)
    except TypeError:
        return -1
    if key is None:
        key = _MOD_KEYS[ident] = len(_MODS)
        _MODS[key] = (score_mod, mask_mod)
    return key


_UNKNOWN = object()


def _function_parts(fn):
    """A mod as a traced call hands it to mods_key: a plain function as its code, module,
    defaults and closure values (Dynamo converts those to constants; a closure value it has made
    symbolic is a graph break there, not an error), else itself; None where it must stay
    outside the graph (a closure over a tensor, keyword defaults, not a function)."""
    import types
    from .jit import JITFunction
    if fn is None or isinstance(fn, JITFunction):
        return fn
    if not isinstance(fn, types.FunctionType) or fn.__kwdefaults__ is not None:
        return None
    cells = tuple(c.cell_contents for c in fn.__closure__ or ())
    if any(isinstance(v, sys.modules["torch"].Tensor) for v in cells):
        return None
    return ("function", fn.__code__, fn.__module__, fn.__defaults__, cells)


def _rebuilt(part):
    """The function _function_parts took apart (in its module's globals), or `part` itself."""
    if not (isinstance(part, tuple) and part and part[0] == "function"):
        return part
    import types
    _, code, module, defaults, cells = part
    scope = getattr(sys.modules.get(module), "__dict__", None)
    if scope is None:
        return _UNKNOWN
    return types.FunctionType(code, scope, code.co_name, defaults,
                              tuple(types.CellType(v) for v in cells) or None)


_LIBRARIES = ("tessel", "torch", "numpy", "math")     # functions not looked into


def _reads_tensors(fn, depth=4):
    """Whether fn (a mod, a @tessel.jit function or one it calls, up to `depth` calls deep)
    names a tensor in its closure, its globals or a module it reads an attribute of; True
    where that cannot be told."""
    import types
    from . import capture
    fn = getattr(fn, "fn", fn)                  # a JITFunction's Python function
    code = getattr(fn, "__code__", None)
    if code is None:
        return True
    try:
        values = [c.cell_contents for c in fn.__closure__ or ()]
    except ValueError:                          # an empty cell
        return True
    scope = getattr(fn, "__globals__", {})
    values += [scope[n] for n in code.co_names if n in scope]
    for v in values:
        if capture.is_tensor(v):
            return True
        if isinstance(v, types.ModuleType) and any(
                capture.is_tensor(getattr(v, n, None)) for n in code.co_names):
            return True
        if callable(v) and hasattr(getattr(v, "fn", v), "__code__") and \
                (getattr(v, "__module__", None) or "").split(".")[0] not in _LIBRARIES and \
                (depth == 0 or _reads_tensors(v, depth - 1)):
            return True
    return False


def _traced_mods_key(score_mod, mask_mod):
    """mods_key as a traced call asks it (Dynamo runs mods_key at trace time on constants)."""
    parts = (_function_parts(score_mod), _function_parts(mask_mod))
    if any(p is None and fn is not None for p, fn in zip(parts, (score_mod, mask_mod))):
        return -1
    return _mods_key(*parts)


def outside_graph(fn, *args, **kwargs):
    """fn(*args, **kwargs) run eagerly, outside the compiled graph (a graph break)."""
    torch = sys.modules["torch"]
    return torch.compiler.disable(fn, recursive=True)(*args, **kwargs)


def _window(window_size):
    """window_size as the ops' int list (None: no window)."""
    return None if window_size is None else [int(w) for w in window_size]


def _output_strides(q, shape):
    """The strides tessel.attention gives o: contiguous for a contiguous q, else a
    [B, Nq, H, Ev] buffer seen as [B, H, Nq, Ev] (SDPA's flash backend's layout). torch's own
    rule for contiguous strides, symbolic sizes included."""
    from torch._prims_common import make_contiguous_strides_for
    if q.is_contiguous():
        return make_contiguous_strides_for(shape)
    B, H, Nq, Ev = shape
    s = make_contiguous_strides_for((B, Nq, H, Ev))
    return (s[0], s[2], s[1], s[3])


def _laid_out(x, strides):
    """x with exactly `strides` (copied where the eager route laid it out otherwise): the fake
    implementation promised them, and compiled code may index by them."""
    if tuple(x.stride()) == tuple(strides):
        return x
    torch = sys.modules["torch"]
    out = torch.empty_strided(tuple(x.shape), strides, dtype=x.dtype, device=x.device)
    out.copy_(x)
    return out


def register():
    """The ops' namespace, defined on the first call; None where this torch cannot define them
    (torch.library.custom_op came with torch 2.4): the entry points then run outside the
    graph, and one warning says why."""
    global _ops, _mods_key
    if _ops is None:
        try:
            _ops = _define()
            _mods_key = sys.modules["torch"]._dynamo.assume_constant_result(mods_key)
        except Exception as e:
            _ops = False
            if hasattr(sys.modules["torch"], "library"):   # (not a stand-in torch of tests)
                import warnings
                warnings.warn(f"tessel: no torch.compile ops with this torch ({e}); tessel "
                              "calls in compiled code run outside the graph")
    return _ops or None


def _define():
    """Defines the ops (torch.library.custom_op) with their fake implementations and
    autograd."""
    torch = sys.modules["torch"]
    from torch import Tensor

    @torch.library.custom_op("tessel::attention", mutates_args=())
    def attention_op(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float | None,
                     enable_gqa: bool, block_m: int | None, block_n: int | None,
                     deterministic: bool, window_size: list[int] | None,
                     softcap: float | None, alibi_slopes: Tensor | None, mods: int
                     ) -> tuple[Tensor, Tensor]:
        from .attention import attention
        score_mod, mask_mod = _MODS[mods]
        with torch.no_grad():
            o, lse = attention(q, k, v, causal=causal, scale=scale, score_mod=score_mod,
                               mask_mod=mask_mod, enable_gqa=enable_gqa, return_lse=True,
                               block_m=block_m, block_n=block_n, deterministic=deterministic,
                               window_size=window_size, softcap=softcap,
                               alibi_slopes=alibi_slopes)
        return _laid_out(o, _output_strides(q, o.shape)), lse.contiguous()

    @attention_op.register_fake
    def _(q, k, v, causal, scale, enable_gqa, block_m, block_n, deterministic, window_size,
          softcap, alibi_slopes, mods):
        from .attention import _check_shapes
        B, H, Nq, _, _, _ = _check_shapes(q.shape, k.shape, v.shape, enable_gqa, True)
        shape = (B, H, Nq, v.shape[-1])
        o = torch.empty_strided(shape, _output_strides(q, shape), dtype=q.dtype,
                                device=q.device)
        return o, q.new_empty((B, H, Nq), dtype=torch.float32)

    @torch.library.custom_op("tessel::attention_backward", mutates_args=())
    def attention_backward_op(q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor,
                              do: Tensor, dlse: Tensor | None, causal: bool,
                              scale: float | None, enable_gqa: bool, deterministic: bool,
                              window_size: list[int] | None, softcap: float | None,
                              alibi_slopes: Tensor | None, mods: int
                              ) -> tuple[Tensor, Tensor, Tensor]:
        from .attention import _pad_columns, softmax_scale
        from .backward import attention_backward
        score_mod, mask_mod = _MODS[mods]
        D, Ev = q.shape[-1], v.shape[-1]
        qp, kp = q, k
        if Ev > D:      # the forward padded q and k to v's width (call_with_value_head_dim)
            qp, kp, scale = _pad_columns(q, Ev), _pad_columns(k, Ev), softmax_scale(scale, D)
        with torch.no_grad():
            dq, dk, dv = attention_backward(
                qp, kp, v, o, lse, do, causal=causal, scale=scale, score_mod=score_mod,
                mask_mod=mask_mod, enable_gqa=enable_gqa, dlse=dlse,
                deterministic=deterministic, window_size=window_size, softcap=softcap,
                alibi_slopes=alibi_slopes)
        return tuple(g[..., :n].contiguous() for g, n in ((dq, D), (dk, D), (dv, Ev)))

    @attention_backward_op.register_fake
    def _(q, k, v, o, lse, do, dlse, causal, scale, enable_gqa, deterministic, window_size,
          softcap, alibi_slopes, mods):
        return (q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape))

    def setup_context(ctx, inputs, output):
        q, k, v, causal, scale, enable_gqa, _, _, deterministic, window_size, softcap, \
            alibi_slopes, mods = inputs
        o, lse = output
        ctx.save_for_backward(q, k, v, o, lse, alibi_slopes)
        ctx.options = (causal, scale, enable_gqa, deterministic, window_size, softcap, mods)
        # The LSE's gradient, mostly never asked for, comes as None, not as zeros made per call.
        ctx.set_materialize_grads(False)

    def backward(ctx, do, dlse):
        q, k, v, o, lse, alibi_slopes = ctx.saved_tensors
        causal, scale, enable_gqa, deterministic, window_size, softcap, mods = ctx.options
        if do is None:                      # only the LSE has a gradient
            do = torch.zeros_like(o)
        dq, dk, dv = attention_backward_op(q, k, v, o, lse, do, dlse, causal, scale, enable_gqa,
                                           deterministic, window_size, softcap, alibi_slopes,
                                           mods)
        return (dq, dk, dv) + (None,) * 10

    attention_op.register_autograd(backward, setup_context=setup_context)
    varlen = _register_varlen(torch, Tensor)
    kvcache = _register_kvcache(torch, Tensor)
    sdpa = _register_sdpa(torch, Tensor)

    class Ops:
        attention = attention_op
        attention_backward = attention_backward_op
        attention_varlen, attention_varlen_backward = varlen
        attention_with_kvcache, attention_with_kvcache_append = kvcache
        sdpa_forward, sdpa_backward = sdpa

    return Ops


def _register_varlen(torch, Tensor):
    """tessel::attention_varlen (packed sequences, or a paged cache with block_table) and its
    backward op (packed only: the eager call refuses gradients with block_table)."""

    @torch.library.custom_op("tessel::attention_varlen", mutates_args=())
    def varlen_op(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor,
                  cu_seqlens_k: Tensor | None, max_seqlen_q: int, max_seqlen_k: int,
                  causal: bool, scale: float | None, block_m: int | None, block_n: int | None,
                  window_size: list[int] | None, softcap: float | None,
                  alibi_slopes: Tensor | None, block_table: Tensor | None,
                  seqused_k: Tensor | None) -> tuple[Tensor, Tensor]:
        from .serving import attention_varlen
        with torch.no_grad():
            o, lse = attention_varlen(
                q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=causal,
                scale=scale, return_lse=True, block_m=block_m, block_n=block_n,
                window_size=window_size, softcap=softcap, alibi_slopes=alibi_slopes,
                block_table=block_table, seqused_k=seqused_k)
        return o.contiguous(), lse.contiguous()

    @varlen_op.register_fake
    def _(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale,
          block_m, block_n, window_size, softcap, alibi_slopes, block_table, seqused_k):
        total_q, H, _ = q.shape
        return (q.new_empty((total_q, H, v.shape[-1])),
                q.new_empty((H, total_q), dtype=torch.float32))

    @torch.library.custom_op("tessel::attention_varlen_backward", mutates_args=())
    def varlen_backward_op(q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, do: Tensor,
                           dlse: Tensor | None, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor,
                           max_seqlen_q: int, max_seqlen_k: int, causal: bool,
                           scale: float | None, window_size: list[int] | None,
                           softcap: float | None, alibi_slopes: Tensor | None
                           ) -> tuple[Tensor, Tensor, Tensor]:
        from .attention import _pad_columns, softmax_scale
        from .varlen_backward import packed_backward, takes_value_dim
        D, Ev = q.shape[-1], v.shape[-1]
        qp, kp, vp, op, dop = q, k, v, o, do
        if Ev > D:      # the forward padded q and k to v's width (call_with_value_head_dim)
            qp, kp, scale = _pad_columns(q, Ev), _pad_columns(k, Ev), softmax_scale(scale, D)
        elif Ev < D and not takes_value_dim(q, k, v, window_size, softcap, alibi_slopes):
            vp, op, dop = (_pad_columns(x, D) for x in (v, o, do))
        with torch.no_grad():
            dq, dk, dv = packed_backward(qp, kp, vp, op, lse, dop, dlse, cu_seqlens_q,
                                         cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=causal,
                                         scale=scale, window_size=window_size, softcap=softcap,
                                         alibi_slopes=alibi_slopes)
        return tuple(g[..., :n].contiguous() for g, n in ((dq, D), (dk, D), (dv, Ev)))

    @varlen_backward_op.register_fake
    def _(q, k, v, o, lse, do, dlse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
          causal, scale, window_size, softcap, alibi_slopes):
        return (q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape))

    def setup_context(ctx, inputs, output):
        q, k, v, cu_q, cu_k, max_q, max_k, causal, scale, _, _, window_size, softcap, \
            alibi_slopes, _, _ = inputs
        o, lse = output
        ctx.save_for_backward(q, k, v, o, lse, cu_q, cu_k, alibi_slopes)
        ctx.options = (max_q, max_k, causal, scale, window_size, softcap)
        ctx.set_materialize_grads(False)

    def backward(ctx, do, dlse):
        q, k, v, o, lse, cu_q, cu_k, alibi_slopes = ctx.saved_tensors
        max_q, max_k, causal, scale, window_size, softcap = ctx.options
        if do is None:
            do = torch.zeros_like(o)
        dq, dk, dv = varlen_backward_op(q, k, v, o, lse, do, dlse, cu_q, cu_k, max_q, max_k,
                                        causal, scale, window_size, softcap, alibi_slopes)
        return (dq, dk, dv) + (None,) * 13

    varlen_op.register_autograd(backward, setup_context=setup_context)
    return varlen_op, varlen_backward_op


def _register_sdpa(torch, Tensor):
    """tessel::sdpa_forward and tessel::sdpa_backward: tessel.scaled_dot_product_attention with
    its attn_mask an input of the op (a mod reading it could not ride as a key: the graph must
    know the op reads the mask), q, k, v and the mask already [B, H, N, E]."""

    @torch.library.custom_op("tessel::sdpa_forward", mutates_args=())
    def forward_op(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool,
                   scale: float | None, enable_gqa: bool) -> tuple[Tensor, Tensor]:
        from .attention import attention
        from .sdpa import mask_mods
        with torch.no_grad():
            o, lse = attention(q, k, v, causal=causal, scale=scale, enable_gqa=enable_gqa,
                               return_lse=True, **mask_mods(mask))
        return _laid_out(o, _output_strides(q, o.shape)), lse.contiguous()

    @forward_op.register_fake
    def _(q, k, v, mask, causal, scale, enable_gqa):
        B, H, L, _ = q.shape
        shape = (B, H, L, v.shape[-1])
        o = torch.empty_strided(shape, _output_strides(q, shape), dtype=q.dtype,
                                device=q.device)
        return o, q.new_empty((B, H, L), dtype=torch.float32)

    @torch.library.custom_op("tessel::sdpa_backward", mutates_args=())
    def backward_op(q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, do: Tensor,
                    mask: Tensor | None, causal: bool, scale: float | None, enable_gqa: bool
                    ) -> tuple[Tensor, Tensor, Tensor]:
        from .attention import _pad_columns, softmax_scale
        from .backward import attention_backward
        from .sdpa import mask_mods
        D, Ev = q.shape[-1], v.shape[-1]
        qp, kp = q, k
        if Ev > D:      # the forward padded q and k to v's width (call_with_value_head_dim)
            qp, kp, scale = _pad_columns(q, Ev), _pad_columns(k, Ev), softmax_scale(scale, D)
        with torch.no_grad():
            dq, dk, dv = attention_backward(qp, kp, v, o, lse, do, causal=causal, scale=scale,
                                            enable_gqa=enable_gqa, **mask_mods(mask))
        return tuple(g[..., :n].contiguous() for g, n in ((dq, D), (dk, D), (dv, Ev)))

    @backward_op.register_fake
    def _(q, k, v, o, lse, do, mask, causal, scale, enable_gqa):
        return (q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape))

    def setup_context(ctx, inputs, output):
        q, k, v, mask, causal, scale, enable_gqa = inputs
        ctx.save_for_backward(q, k, v, *output, mask)
        ctx.options = (causal, scale, enable_gqa)

    def backward(ctx, do, _):
        q, k, v, o, lse, mask = ctx.saved_tensors
        return (*backward_op(q, k, v, o, lse, do, mask, *ctx.options), None, None, None, None)

    forward_op.register_autograd(backward, setup_context=setup_context)
    return forward_op, backward_op


def _register_kvcache(torch, Tensor):
    """tessel::attention_with_kvcache (reads the cache) and tessel::attention_with_kvcache_append
    (k and v written into it first: the caches are mutated, declared so that the graph orders
    later reads after the write). Inference only, as the eager call."""

    def run(q, k_cache, v_cache, cache_seqlens, block_table, causal, scale, block_m, block_n,
            num_splits, window_size, softcap, alibi_slopes, k, v, rotary_cos, rotary_sin,
            rotary_interleaved, cache_batch_idx, cache_leftpad):
        from .serving import attention_with_kvcache
        with torch.no_grad():
            o, lse = attention_with_kvcache(
                q, k_cache, v_cache, cache_seqlens, block_table, causal=causal, scale=scale,
                return_lse=True, block_m=block_m, block_n=block_n, num_splits=num_splits,
                window_size=window_size, softcap=softcap, alibi_slopes=alibi_slopes, k=k, v=v,
                rotary_cos=rotary_cos, rotary_sin=rotary_sin,
                rotary_interleaved=rotary_interleaved, cache_batch_idx=cache_batch_idx,
                cache_leftpad=cache_leftpad)
        return o.contiguous(), lse.contiguous()

    def fake(q, k_cache, v_cache, *rest):
        B, Sq, H, _ = q.shape
        return (q.new_empty((B, Sq, H, v_cache.shape[-1])),
                q.new_empty((B, H, Sq), dtype=torch.float32))

    ops = []
    for name, mutates in (("attention_with_kvcache", ()),
                          ("attention_with_kvcache_append", ("k_cache", "v_cache"))):
        def op(q: Tensor, k_cache: Tensor, v_cache: Tensor, cache_seqlens: Tensor,
               block_table: Tensor | None, causal: bool, scale: float | None,
               block_m: int | None, block_n: int | None, num_splits: int | None,
               window_size: list[int] | None, softcap: float | None,
               alibi_slopes: Tensor | None, k: Tensor | None, v: Tensor | None,
               rotary_cos: Tensor | None, rotary_sin: Tensor | None, rotary_interleaved: bool,
               cache_batch_idx: Tensor | None, cache_leftpad: Tensor | None
               ) -> tuple[Tensor, Tensor]:
            return run(q, k_cache, v_cache, cache_seqlens, block_table, causal, scale, block_m,
                       block_n, num_splits, window_size, softcap, alibi_slopes, k, v,
                       rotary_cos, rotary_sin, rotary_interleaved, cache_batch_idx,
                       cache_leftpad)
        defined = torch.library.custom_op(f"tessel::{name}", op, mutates_args=mutates)
        defined.register_fake(fake)
        ops.append(defined)
    return ops


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
    mods = _traced_mods_key(score_mod, mask_mod) if ops is not None else -1
    if mods < 0 or any(x is not None for x in (block_mask, descale_q, descale_k, descale_v,
                                               out_dtype)) or \
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
                           mods)
    return (o, lse) if return_lse else o


def attention_backward(q, k, v, o, lse, do, causal, scale, score_mod, mask_mod, enable_gqa,
                       dlse, block_m, block_n, block_mask, deterministic, window_size, softcap,
                       alibi_slopes):
    """tessel.attention_backward while Dynamo traces (the backward's own blocks: block_m and
    block_n are taken outside the graph, as the mods)."""
    ops = register()
    mods = _traced_mods_key(score_mod, mask_mod) if ops is not None else -1
    if mods < 0 or block_mask is not None or block_m is not None or block_n is not None:
        from .backward import attention_backward as eager
        return outside_graph(eager, q, k, v, o, lse, do, causal=causal, scale=scale,
                             score_mod=score_mod, mask_mod=mask_mod, enable_gqa=enable_gqa,
                             dlse=dlse, block_m=block_m, block_n=block_n,
                             block_mask=block_mask, deterministic=deterministic,
                             window_size=window_size, softcap=softcap,
                             alibi_slopes=alibi_slopes)
    return ops.attention_backward(q, k, v, o, lse, do, dlse, bool(causal), scale,
                                  bool(enable_gqa), bool(deterministic), _window(window_size),
                                  softcap, alibi_slopes, mods)


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
