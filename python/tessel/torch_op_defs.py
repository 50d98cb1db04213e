"""The torch.library custom ops behind tessel's entry points under torch.compile: their schemas,
real implementations (the eager entry points), fake implementations (shapes, dtypes, strides)
and autograd. python/tessel/torch_ops.py registers them and routes traced calls to them;
docs/torch-compile.md.
"""
import sys

from .torch_mods import lookup


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


def _fake_outputs(torch, q, v, B, H, Nq):
    """The fake o and lse of a [B, H, Nq] attention: o laid out as _output_strides says."""
    shape = (B, H, Nq, v.shape[-1])
    o = torch.empty_strided(shape, _output_strides(q, shape), dtype=q.dtype, device=q.device)
    return o, q.new_empty((B, H, Nq), dtype=torch.float32)


def _gradients(run, q, k, v, scale):
    """run(q, k, scale) -> (dq, dk, dv), with q and k padded to v's head dim where v is wider
    (as the forward padded them: attention.call_with_value_head_dim; the scale q's own), under
    no_grad; the gradients cut back to q's and v's widths, contiguous."""
    from .attention import _pad_columns, softmax_scale
    D, Ev = q.shape[-1], v.shape[-1]
    if Ev > D:
        q, k, scale = _pad_columns(q, Ev), _pad_columns(k, Ev), softmax_scale(scale, D)
    with sys.modules["torch"].no_grad():
        dq, dk, dv = run(q, k, scale)
    return tuple(g[..., :n].contiguous() for g, n in ((dq, D), (dk, D), (dv, Ev)))


def _block_mask(lists, meta, mask_mod):
    """The BlockMask of an op's block-mask inputs (torch_ops.block_inputs), or None: the live
    one whose lists they are, else one made around them (lists the graph made or copied, or
    FlexAttention's) and kept for these very tensors unchanged (flex.block_mask_of)."""
    if not lists:
        return None
    from .blocksparse import live_block_mask
    from .flex import block_mask_of
    return (live_block_mask(lists) if meta[6] == 0 else None) or \
        block_mask_of(lists, meta, mask_mod)


def define():
    """Defines the ops (torch.library.custom_op) with their fake implementations and
    autograd."""
    torch = sys.modules["torch"]
    from torch import Tensor

    @torch.library.custom_op("tessel::attention", mutates_args=())
    def attention_op(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float | None,
                     enable_gqa: bool, block_m: int | None, block_n: int | None,
                     deterministic: bool, window_size: list[int] | None,
                     softcap: float | None, alibi_slopes: Tensor | None, mods: int,
                     captured: list[Tensor], block_lists: list[Tensor], block_meta: list[int]
                     ) -> tuple[Tensor, Tensor]:
        from .attention import attention
        score_mod, mask_mod = lookup(mods, captured)
        with torch.no_grad():
            o, lse = attention(q, k, v, causal=causal, scale=scale, score_mod=score_mod,
                               mask_mod=mask_mod, enable_gqa=enable_gqa, return_lse=True,
                               block_m=block_m, block_n=block_n,
                               block_mask=_block_mask(block_lists, block_meta, mask_mod),
                               deterministic=deterministic, window_size=window_size,
                               softcap=softcap, alibi_slopes=alibi_slopes)
        return _laid_out(o, _output_strides(q, o.shape)), lse.contiguous()

    @attention_op.register_fake
    def _(q, k, v, causal, scale, enable_gqa, block_m, block_n, deterministic, window_size,
          softcap, alibi_slopes, mods, captured, block_lists, block_meta):
        from .attention import _check_shapes
        B, H, Nq, _, _, _ = _check_shapes(q.shape, k.shape, v.shape, enable_gqa, True)
        return _fake_outputs(torch, q, v, B, H, Nq)

    @torch.library.custom_op("tessel::attention_backward", mutates_args=())
    def attention_backward_op(q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor,
                              do: Tensor, dlse: Tensor | None, causal: bool,
                              scale: float | None, enable_gqa: bool, deterministic: bool,
                              window_size: list[int] | None, softcap: float | None,
                              alibi_slopes: Tensor | None, mods: int,
                              captured: list[Tensor], block_lists: list[Tensor],
                              block_meta: list[int]) -> tuple[Tensor, Tensor, Tensor]:
        from .backward import attention_backward
        score_mod, mask_mod = lookup(mods, captured)
        bm = _block_mask(block_lists, block_meta, mask_mod)
        return _gradients(lambda q, k, scale: attention_backward(
            q, k, v, o, lse, do, causal=causal, scale=scale, score_mod=score_mod,
            mask_mod=mask_mod, enable_gqa=enable_gqa, dlse=dlse, block_mask=bm,
            deterministic=deterministic, window_size=window_size, softcap=softcap,
            alibi_slopes=alibi_slopes), q, k, v, scale)

    @attention_backward_op.register_fake
    def _(q, k, v, o, lse, do, dlse, causal, scale, enable_gqa, deterministic, window_size,
          softcap, alibi_slopes, mods, captured, block_lists, block_meta):
        return (q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape))

    def setup_context(ctx, inputs, output):
        q, k, v, causal, scale, enable_gqa, _, _, deterministic, window_size, softcap, \
            alibi_slopes, mods, captured, block_lists, block_meta = inputs
        o, lse = output
        ctx.save_for_backward(q, k, v, o, lse, alibi_slopes, *captured, *block_lists)
        ctx.options = (causal, scale, enable_gqa, deterministic, window_size, softcap, mods,
                       len(captured), block_meta)
        # The LSE's gradient, mostly never asked for, comes as None, not as zeros made per call.
        ctx.set_materialize_grads(False)

    def backward(ctx, do, dlse):
        q, k, v, o, lse, alibi_slopes, *tensors = ctx.saved_tensors
        causal, scale, enable_gqa, deterministic, window_size, softcap, mods, n, block_meta = \
            ctx.options
        if do is None:                      # only the LSE has a gradient
            do = torch.zeros_like(o)
        dq, dk, dv = attention_backward_op(q, k, v, o, lse, do, dlse, causal, scale, enable_gqa,
                                           deterministic, window_size, softcap, alibi_slopes,
                                           mods, tensors[:n], tensors[n:], block_meta)
        # A list input takes a list of gradients; torch's structure check sees a list of ints
        # as one leaf, an empty one as an empty list.
        return (dq, dk, dv) + (None,) * 10 + ([None] * n, [None] * (len(tensors) - n),
                                               None if block_meta else [])

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
                           softcap: float | None, alibi_slopes: Tensor | None,
                           seqused_k: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        from .attention import _pad_columns
        from .varlen_backward import packed_backward, takes_value_dim
        vp, op, dop = v, o, do
        D = q.shape[-1]
        if v.shape[-1] < D and not takes_value_dim(q, k, v, window_size, softcap, alibi_slopes):
            vp, op, dop = (_pad_columns(x, D) for x in (v, o, do))   # (dv cut back below)
        return _gradients(lambda q, k, scale: packed_backward(
            q, k, vp, op, lse, dop, dlse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
            max_seqlen_k, causal=causal, scale=scale, window_size=window_size, softcap=softcap,
            alibi_slopes=alibi_slopes, seqused_k=seqused_k), q, k, v, scale)

    @varlen_backward_op.register_fake
    def _(q, k, v, o, lse, do, dlse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
          causal, scale, window_size, softcap, alibi_slopes, seqused_k):
        return (q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape))

    def setup_context(ctx, inputs, output):
        q, k, v, cu_q, cu_k, max_q, max_k, causal, scale, _, _, window_size, softcap, \
            alibi_slopes, _, seqused_k = inputs
        o, lse = output
        ctx.save_for_backward(q, k, v, o, lse, cu_q, cu_k, alibi_slopes, seqused_k)
        ctx.options = (max_q, max_k, causal, scale, window_size, softcap)
        ctx.set_materialize_grads(False)

    def backward(ctx, do, dlse):
        q, k, v, o, lse, cu_q, cu_k, alibi_slopes, seqused_k = ctx.saved_tensors
        max_q, max_k, causal, scale, window_size, softcap = ctx.options
        if do is None:
            do = torch.zeros_like(o)
        dq, dk, dv = varlen_backward_op(q, k, v, o, lse, do, dlse, cu_q, cu_k, max_q, max_k,
                                        causal, scale, window_size, softcap, alibi_slopes,
                                        seqused_k)
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
        return _fake_outputs(torch, q, v, B, H, L)

    @torch.library.custom_op("tessel::sdpa_backward", mutates_args=())
    def backward_op(q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, do: Tensor,
                    mask: Tensor | None, causal: bool, scale: float | None, enable_gqa: bool
                    ) -> tuple[Tensor, Tensor, Tensor]:
        from .backward import attention_backward
        from .sdpa import mask_mods
        return _gradients(lambda q, k, scale: attention_backward(
            q, k, v, o, lse, do, causal=causal, scale=scale, enable_gqa=enable_gqa,
            **mask_mods(mask)), q, k, v, scale)

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
