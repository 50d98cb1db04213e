"""tessel.flash: FlashAttention's Python API (the `flash_attn` package's functions) on tessel's
kernels, so that code written against FlashAttention runs with one import changed:

    from tessel.flash import flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache

Same arguments, layouts ([B, S, H, D]; packed [total, H, D]), defaults and results as
flash_attn 2.x, plus FlashAttention-3's `seqused_k` and `seqused_q` for the varlen call, its
FP8 descales (`q_descale`, `k_descale`, `v_descale`) for flash_attn_func, `attention_chunk`,
and its scheduling keywords (`num_splits`, `pack_gqa`, `sm_margin`: taken, tessel schedules
its own way). Causal, the window and ALiBi are bottom-right aligned when the query and key lengths
differ, as FlashAttention has them (tessel.attention's own are top-left, SDPA's). What
differs, by design (docs/dsl.md, "Code written against FlashAttention"):

- `dropout_p` must be 0: tessel has no attention dropout (a clear error, not a silent no-op).
- `return_attn_probs=True` returns `(out, softmax_lse, None)`: no dropout mask exists.
- `deterministic` is honoured by the dense backward; the varlen programs are deterministic.
- FlashAttention-3's `qv`; `attention_chunk` or `seqused_q` with a varlen paged cache;
  attention_chunk on the KV-cache call with cache_leftpad or with queries in two chunks: are
  refused (NotImplementedError saying what to do instead).

Gradients flow as through the entry points these call (tessel.attention, attention_varlen);
flash_attn_with_kvcache has none, as FlashAttention's.
"""
import numpy as np

from . import gpu

_NAME = "tessel.flash"


def _flash_options(fn, dropout_p, window_size, softcap):
    """(window_size, softcap) as tessel's entry points take them (None for FlashAttention's
    (-1, -1) and 0.0); dropout refused."""
    if dropout_p:
        raise NotImplementedError(
            f"{_NAME}.{fn}: dropout_p={dropout_p}: tessel has no attention dropout; pass 0.0 "
            "(FlashAttention's value in eval mode)")
    window = None
    if window_size is not None and tuple(int(w) for w in window_size) != (-1, -1):
        window = tuple(int(w) for w in window_size)
    return window, (softcap or None)


# FlashAttention-3's keywords tessel does not compute: what each is, what to do instead.
_FA3_REFUSED = {
    "qv": ("MLA's query-value input", "concatenate q with qv and k with v along the head dim"),
}


def _fa3_options(fn, qv=None, num_splits=None, pack_gqa=None, sm_margin=0):
    """FlashAttention-3's keywords: its scheduling hints (num_splits, pack_gqa, sm_margin)
    taken and left to tessel's own choices (the results do not depend on them); what tessel
    does not compute refused (_FA3_REFUSED)."""
    for name, value in (("qv", qv is not None),):
        if value:
            what, instead = _FA3_REFUSED[name]
            raise NotImplementedError(f"{_NAME}.{fn}: {name} ({what}) is not supported by "
                                      f"tessel; {instead}")
    if num_splits is not None and int(num_splits) < 0:
        raise ValueError(f"{_NAME}.{fn}: num_splits must be >= 0, got {num_splits}")
    del pack_gqa, sm_margin             # (tessel packs GQA heads and uses every SM its way)


def _chunk_size(fn, attention_chunk):
    """FlashAttention-3's attention_chunk as an int >= 0 (0 or None: no chunks)."""
    chunk = int(attention_chunk or 0)
    if chunk < 0:
        raise ValueError(f"{_NAME}.{fn}: attention_chunk must be >= 0, got {attention_chunk}")
    return chunk


def _host_ints(x):
    """A 1-D int tensor or array as a list of Python ints (a CUDA tensor waits for the
    device)."""
    return [int(v) for v in (x.tolist() if hasattr(x, "tolist") else x)]


def _rank(fn, name, x, n, shape):
    if len(x.shape) != n:
        raise ValueError(f"{_NAME}.{fn}: {name} must have shape {shape}, got {tuple(x.shape)}")


def _swap(x, a=1, b=2):
    """x with axes a and b swapped ([B, S, H, D] <-> [B, H, S, D] by default): a view of a
    torch tensor (read in place on CUDA) or numpy array."""
    return x.transpose(a, b) if gpu.is_torch_tensor(x) else np.swapaxes(x, a, b)


def _uniform_cu(x, B, S):
    """int32 cumulative lengths of B sequences of S rows, where x is (device)."""
    if gpu.is_torch_tensor(x):
        torch = gpu.torch_module()
        return torch.arange(B + 1, dtype=torch.int32, device=x.device) * S
    return np.arange(B + 1, dtype=np.int32) * S


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False,
                    window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False,
                    return_attn_probs=False, *, q_descale=None, k_descale=None,
                    v_descale=None, qv=None, attention_chunk=0, num_splits=1, pack_gqa=None,
                    sm_margin=0):
    """FlashAttention's ``flash_attn_func``: q ``[B, Sq, H, D]``, k and v ``[B, Sk, Hkv, D]``
    (Hkv dividing H: GQA / MQA); returns out ``[B, Sq, H, Dv]``, or ``(out, softmax_lse
    [B, H, Sq] float32, None)`` with return_attn_probs. q_descale, k_descale, v_descale
    (keywords, FlashAttention-3's): FP8 inputs (float8_e4m3fn) with their descale factors
    (``[B, Hkv]`` or numbers), out in bfloat16, as tessel.attention's FP8 call.

    Equal lengths run tessel.attention on [B, H, S, D] views; where they differ and causal,
    a window or ALiBi place queries (bottom-right aligned, FlashAttention's rule), the batch
    runs as B packed sequences of tessel.attention_varlen. FlashAttention-3's
    attention_chunk=C (Llama 4's chunked local attention: a query sees only the keys of its
    own chunk of C key positions) runs each (batch, chunk) as a packed sequence of
    attention_varlen; its num_splits, pack_gqa and sm_margin are taken and left to tessel; qv
    is refused.
    """
    fn = "flash_attn_func"
    window, cap = _flash_options(fn, dropout_p, window_size, softcap)
    _fa3_options(fn, qv=qv, num_splits=num_splits, pack_gqa=pack_gqa, sm_margin=sm_margin)
    for name, x in (("q", q), ("k", k), ("v", v)):
        _rank(fn, name, x, 4, "[batch, seqlen, heads, head_dim]")
    B, Sq, H, D = q.shape
    Sk, Hkv = k.shape[1], k.shape[2]
    fp8 = {n: x for n, x in (("descale_q", q_descale), ("descale_k", k_descale),
                             ("descale_v", v_descale)) if x is not None}
    chunk = _chunk_size(fn, attention_chunk)
    if chunk and fp8:
        raise NotImplementedError(f"{_NAME}.{fn}: FP8 inputs (q_descale, ...) take no "
                                  "attention_chunk")
    if chunk and (chunk < Sk or Sq > Sk):   # (one chunk and no query before it: no effect)
        if _chunk_by_mask(q, Sq, Sk, chunk, causal):
            from .attention import attention
            res = attention(_swap(q), _swap(k), _swap(v), causal=causal, scale=softmax_scale,
                            mask_mod=_chunk_mask(chunk), enable_gqa=H != Hkv,
                            return_lse=return_attn_probs, deterministic=deterministic,
                            window_size=window, softcap=cap, alibi_slopes=alibi_slopes)
            return (_swap(res[0]), res[1], None) if return_attn_probs else _swap(res)
        return _packed(q, k, v, return_attn_probs, lambda qp, kp, vp: _chunked(
            qp, kp, vp, chunk, [b * Sq for b in range(B + 1)], [b * Sk for b in range(B + 1)],
            causal, softmax_scale, window, cap, alibi_slopes))
    if Sq != Sk and (causal or window is not None or alibi_slopes is not None):
        if fp8:
            raise NotImplementedError(
                f"{_NAME}.{fn}: FP8 (q_descale, ...) with query and key lengths that differ "
                "under causal, a window or ALiBi: tessel's FP8 kernels align them top-left; "
                "pad the queries to the keys' length")
        from .serving import attention_varlen
        return _packed(q, k, v, return_attn_probs, lambda qp, kp, vp: attention_varlen(
            qp, kp, vp, _uniform_cu(q, B, Sq), _uniform_cu(q, B, Sk), Sq, Sk, causal=causal,
            scale=softmax_scale, return_lse=True, window_size=window, softcap=cap,
            alibi_slopes=alibi_slopes))
    from .attention import attention
    res = attention(_swap(q), _swap(k), _swap(v), causal=causal, scale=softmax_scale,
                    enable_gqa=H != Hkv, return_lse=return_attn_probs,
                    deterministic=deterministic, window_size=window, softcap=cap,
                    alibi_slopes=alibi_slopes, **fp8)
    if not return_attn_probs:
        return _swap(res)
    return _swap(res[0]), res[1], None


def _packed(q, k, v, return_attn_probs, run):
    """flash_attn_func's [B, S, H, D] batch through a packed-sequence call `run(q, k, v)` (on
    [B·S, H, D] views of the rows; returns o and the LSE [H, B·Sq]): out [B, Sq, H, Dv], and
    with return_attn_probs the LSE [B, H, Sq] too."""
    B, Sq, H, D = q.shape
    o, lse = run(q.reshape(B * Sq, H, D), k.reshape(-1, *k.shape[2:]),
                 v.reshape(-1, *v.shape[2:]))
    out = o.reshape(B, Sq, H, o.shape[-1])
    return (out, _swap(lse.reshape(H, B, Sq), 0, 1), None) if return_attn_probs else out


#: attention_chunk C runs as a `q_idx // C == kv_idx // C` mask_mod where C is a multiple of
#: this (the largest query block of the kernels that take a mask_mod, so that
#: tile-floor-quotient-ranges classifies every key block) and at most CHUNK_MASK_MAX (causal;
#: half of it not causal): there the mask's kernel skips other chunks' blocks at no packing
#: cost. Larger chunks run as packed sequences, at the dense kernels' speed. H100, fp16 d128
#: 16k keys, mask / packed (docs/bench/2026-12-07-h100-s54.md): causal forward 2.11 / 1.84 /
#: 1.24 / 1.09 / 1.07x at C = 512 ... 8192, with the backward 1.60 / 1.44 / 1.11 / 1.04 /
#: 0.97x; not causal 1.88 / 1.36 / 1.13 / 0.96 / 0.85x, with the backward 1.28 / 1.24 / 1.00 /
#: 0.97 / 0.94x.
CHUNK_MASK_MULTIPLE = 128
CHUNK_MASK_MAX = 4096
_CHUNK_MASKS = {}


def _chunk_by_mask(q, Sq, Sk, C, causal):
    """Whether flash_attn_func's attention_chunk=C takes the mask_mod route: equal lengths
    (no query placed before the keys), C a multiple of CHUNK_MASK_MULTIPLE up to
    CHUNK_MASK_MAX (causal; half of it not), outside torch.compile (its graph keeps the
    packed route: a closure over a number made in the compiled function breaks torch 2.11's
    graph)."""
    from . import torch_ops
    top = CHUNK_MASK_MAX if causal else CHUNK_MASK_MAX // 2
    return (Sq == Sk and C % CHUNK_MASK_MULTIPLE == 0 and C <= top
            and not torch_ops.compiling(q))


def _chunk_mask(C):
    """The mask_mod of attention_chunk=C, one function a chunk size (its kernels keyed once)."""
    if C not in _CHUNK_MASKS:
        def same_chunk(b, h, q_idx, kv_idx):
            return q_idx // C == kv_idx // C
        _CHUNK_MASKS[C] = same_chunk
    return _CHUNK_MASKS[C]


def _chunk_groups(cu_q, cu_k, C, used=None, used_q=None):
    """attention_chunk's packed sequences for sequences whose rows are cu_q / cu_k (cumulative
    lengths, plain ints; `used`, `used_q`: FlashAttention-3's seqused_k and seqused_q, the
    first n keys / queries of each span; C None: one chunk of every key): per sequence, the
    queries placed before its first key (more queries than keys: FlashAttention's
    bottom-right rule, they see no key) with no keys, then each chunk of C keys with the
    queries placed in it (query i at key position i + nk - nq), then the span's unused queries
    with no keys, then its unused keys with no queries. Returns (cu_q', cu_k',
    max_seqlen_q', max_seqlen_k', groups a sequence). Without chunks (C None) the used
    queries and keys are one sequence, and the kernels place the queries."""
    out_q, out_k, groups = [cu_q[0]], [cu_k[0]], []
    for b, (q0, q1, k0, k1) in enumerate(zip(cu_q, cu_q[1:], cu_k, cu_k[1:])):
        nq = q1 - q0 if used_q is None else min(max(used_q[b], 0), q1 - q0)
        nk = k1 - k0 if used is None else min(max(used[b], 0), k1 - k0)
        off, n = nk - nq, 0
        if off < 0 and C:       # (without chunks the kernels place them: causal or not)
            out_q.append(q0 - off)
            out_k.append(k0)
            n += 1
        step = C or max(nk, 1)
        for c0 in range(0, nk, step):
            c1 = min(c0 + step, nk)
            out_q.append(q0 + min(max(c1 - off, 0), nq))
            out_k.append(k0 + c1)
            n += 1
        if out_q[-1] < q1:                      # (unused queries; or no keys, no chunk at all)
            out_q.append(q1)
            out_k.append(k0 + nk)
            n += 1
        if k0 + nk < k1:                        # (unused keys)
            out_q.append(q1)
            out_k.append(k1)
            n += 1
        groups.append(n)
    # (plain ints and loops: under torch.compile they are constants, where numpy would be
    # traced; torch 2.11's Dynamo takes no max(..., default=))
    max_q = max_k = 0
    for a, b, c, d in zip(out_q, out_q[1:], out_k, out_k[1:]):
        max_q, max_k = max(max_q, b - a), max(max_k, d - c)
    return out_q, out_k, max_q, max_k, groups


def _chunked(q, k, v, C, cu_q, cu_k, causal, scale, window, cap, alibi_slopes, used=None,
             used_q=None):
    """attention_varlen over packed q [total_q, H, D], k and v [total_k, Hkv, D] with
    FlashAttention-3's attention_chunk=C: a query sees the keys of its own chunk of C key
    positions only (a query placed before the first key, where a sequence has more queries
    than keys, is in none: it sees no key, causal or not). Each (sequence, chunk) is a packed
    sequence of tessel.attention_varlen — exact, and each chunk costs what it attends, whether
    or not C is a multiple of the kernels' blocks (a mask_mod over `q_idx // C` is classified
    per block only where it is: tile-floor-quotient-ranges). cu_q, cu_k, used (seqused_k):
    lists of ints; used_q (seqused_q): the queries past it see no key (out 0, LSE -inf); C
    None: no chunks (seqused_q alone). Returns (o, lse [H, total_q])."""
    from .serving import attention_varlen
    cq, ck, max_q, max_k, groups = _chunk_groups(cu_q, cu_k, C, used, used_q)
    if gpu.is_torch_tensor(q):
        torch = gpu.torch_module()
        cq, ck = (torch.tensor(x, dtype=torch.int32, device=q.device) for x in (cq, ck))
        if alibi_slopes is not None and len(alibi_slopes.shape) == 2:  # [B, H]: a sequence's
            alibi_slopes = alibi_slopes.repeat_interleave(                  # for its chunks
                torch.tensor(groups, device=alibi_slopes.device), 0)
    else:
        cq, ck = (np.array(x, np.int32) for x in (cq, ck))
        if alibi_slopes is not None and len(np.shape(alibi_slopes)) == 2:
            alibi_slopes = np.repeat(alibi_slopes, groups, axis=0)
    return attention_varlen(q, k, v, cq, ck, max_q, max_k, causal=causal, scale=scale,
                            return_lse=True, window_size=window, softcap=cap,
                            alibi_slopes=alibi_slopes)


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False,
                              window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                              deterministic=False, return_attn_probs=False):
    """FlashAttention's ``flash_attn_qkvpacked_func``: qkv ``[B, S, 3, H, D]`` (its three
    parts read in place where the layout allows); as flash_attn_func."""
    _rank("flash_attn_qkvpacked_func", "qkv", qkv, 5, "[batch, seqlen, 3, heads, head_dim]")
    return flash_attn_func(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], dropout_p, softmax_scale,
                           causal, window_size, softcap, alibi_slopes, deterministic,
                           return_attn_probs)


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False,
                             window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                             deterministic=False, return_attn_probs=False):
    """FlashAttention's ``flash_attn_kvpacked_func``: kv ``[B, Sk, 2, Hkv, D]``; as
    flash_attn_func."""
    _rank("flash_attn_kvpacked_func", "kv", kv, 5, "[batch, seqlen, 2, heads_k, head_dim]")
    return flash_attn_func(q, kv[:, :, 0], kv[:, :, 1], dropout_p, softmax_scale, causal,
                           window_size, softcap, alibi_slopes, deterministic, return_attn_probs)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           dropout_p=0.0, softmax_scale=None, causal=False,
                           window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None,
                           seqused_k=None, *, seqused_q=None, qv=None, attention_chunk=0,
                           num_splits=1, pack_gqa=None, sm_margin=0):
    """FlashAttention's ``flash_attn_varlen_func``: tessel.attention_varlen (q ``[total_q, H,
    D]``, k and v ``[total_k, Hkv, D]``, or a paged cache with block_table; FlashAttention-3's
    seqused_k); returns out, or ``(out, softmax_lse [H, total_q], None)``. FlashAttention-3's
    attention_chunk as flash_attn_func's, and its seqused_q (each sequence's first seqused_q
    queries attend, placed against its used keys; the others get 0 and LSE -inf, and no
    gradient) — both read the sequences' bounds on the host (a CUDA cu_seqlens waits for the
    device), not with block_table; num_splits, pack_gqa and sm_margin are taken and left to
    tessel; qv is refused."""
    from .serving import attention_varlen
    fn = "flash_attn_varlen_func"
    window, cap = _flash_options(fn, dropout_p, window_size, softcap)
    _fa3_options(fn, qv=qv, num_splits=num_splits, pack_gqa=pack_gqa, sm_margin=sm_margin)
    chunk = _chunk_size(fn, attention_chunk)
    if chunk or seqused_q is not None:
        if block_table is not None:
            raise NotImplementedError(
                f"{_NAME}.{fn}: {'attention_chunk' if chunk else 'seqused_q'} with a paged "
                "cache (block_table) is not supported by tessel")
        # The packed sequences' bounds from the sequences' lengths: read on the host (a CUDA
        # cu_seqlens waits for the device here).
        cu_q, cu_k = (_host_ints(x) for x in (cu_seqlens_q, cu_seqlens_k))
        used, used_q = (None if x is None else _host_ints(x) for x in (seqused_k, seqused_q))
        o, lse = _chunked(q, k, v, chunk or None, cu_q, cu_k, causal, softmax_scale, window,
                          cap, alibi_slopes, used, used_q)
        return (o, lse, None) if return_attn_probs else o
    res = attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           causal=causal, scale=softmax_scale, return_lse=return_attn_probs,
                           window_size=window, softcap=cap, alibi_slopes=alibi_slopes,
                           block_table=block_table, seqused_k=seqused_k)
    return (res[0], res[1], None) if return_attn_probs else res


def flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen, dropout_p=0.0,
                                     softmax_scale=None, causal=False, window_size=(-1, -1),
                                     softcap=0.0, alibi_slopes=None, deterministic=False,
                                     return_attn_probs=False):
    """FlashAttention's ``flash_attn_varlen_qkvpacked_func``: qkv ``[total, 3, H, D]``, one
    set of cumulative lengths; as flash_attn_varlen_func."""
    _rank("flash_attn_varlen_qkvpacked_func", "qkv", qkv, 4, "[total, 3, heads, head_dim]")
    return flash_attn_varlen_func(qkv[:, 0], qkv[:, 1], qkv[:, 2], cu_seqlens, cu_seqlens,
                                  max_seqlen, max_seqlen, dropout_p, softmax_scale, causal,
                                  window_size, softcap, alibi_slopes, deterministic,
                                  return_attn_probs)


def flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                    max_seqlen_k, dropout_p=0.0, softmax_scale=None,
                                    causal=False, window_size=(-1, -1), softcap=0.0,
                                    alibi_slopes=None, deterministic=False,
                                    return_attn_probs=False):
    """FlashAttention's ``flash_attn_varlen_kvpacked_func``: kv ``[total_k, 2, Hkv, D]``; as
    flash_attn_varlen_func."""
    _rank("flash_attn_varlen_kvpacked_func", "kv", kv, 4, "[total_k, 2, heads_k, head_dim]")
    return flash_attn_varlen_func(q, kv[:, 0], kv[:, 1], cu_seqlens_q, cu_seqlens_k,
                                  max_seqlen_q, max_seqlen_k, dropout_p, softmax_scale, causal,
                                  window_size, softcap, alibi_slopes, deterministic,
                                  return_attn_probs)


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None,
                            rotary_sin=None, cache_seqlens=None, cache_batch_idx=None,
                            cache_leftpad=None, block_table=None, softmax_scale=None,
                            causal=False, window_size=(-1, -1), softcap=0.0,
                            rotary_interleaved=True, alibi_slopes=None, num_splits=0,
                            return_softmax_lse=False, *, qv=None, attention_chunk=0,
                            pack_gqa=None, sm_margin=0):
    """FlashAttention's ``flash_attn_with_kvcache``: tessel.attention_with_kvcache (k, v
    appended into the cache in place, rotary, paged caches, split-KV decoding). cache_seqlens
    None: the whole contiguous cache (FlashAttention's); num_splits 0: tessel's heuristic.
    FlashAttention-3's attention_chunk=C: the queries see the keys of their chunk of C key
    positions only — the cache rows before the chunk are skipped as cache_leftpad skips rows
    (no copy, no host sync for a decode step: one query, at most one new key); several
    queries must lie in one chunk (checked on the host). Returns out, or ``(out,
    softmax_lse [B, H, Sq])``."""
    from .serving import attention_with_kvcache
    fn = "flash_attn_with_kvcache"
    window, cap = _flash_options(fn, 0.0, window_size, softcap)
    _fa3_options(fn, qv=qv, num_splits=num_splits, pack_gqa=pack_gqa, sm_margin=sm_margin)
    if cache_seqlens is None:
        if block_table is not None:
            raise ValueError(f"{_NAME}.{fn}: a paged cache (block_table) needs cache_seqlens: "
                             "its sequences' key counts")
        cache_seqlens = int(k_cache.shape[1])
    chunk = _chunk_size(fn, attention_chunk)
    if chunk:
        if cache_leftpad is not None:
            raise NotImplementedError(f"{_NAME}.{fn}: attention_chunk with cache_leftpad is not "
                                      "supported by tessel (both say where the keys start)")
        cache_seqlens, cache_leftpad = _chunk_start(fn, q, cache_seqlens, k, chunk)
    return attention_with_kvcache(
        q, k_cache, v_cache, cache_seqlens, block_table=block_table, causal=causal,
        scale=softmax_scale, return_lse=return_softmax_lse,
        num_splits=None if not num_splits else int(num_splits), window_size=window,
        softcap=cap, alibi_slopes=alibi_slopes, k=k, v=v, rotary_cos=rotary_cos,
        rotary_sin=rotary_sin, rotary_interleaved=rotary_interleaved,
        cache_batch_idx=cache_batch_idx, cache_leftpad=cache_leftpad)


def _chunk_start(fn, q, cache_seqlens, k, C):
    """flash_attn_with_kvcache's attention_chunk=C as (cache_seqlens, an int32 [B] array or
    tensor where q is, made once here from an int; cache_leftpad, the row each sequence's keys
    start at): the first row of the last query's chunk, the last query at key position
    cache_seqlens + new keys − 1 (bottom-right). One query and at most
    one new key need no check (the chunk starts at or before the cache's end); otherwise every
    query must lie in that chunk, at or after the first key, and the chunk must not start
    among the new keys — checked on the host (a CUDA cache_seqlens waits for the device)."""
    from .serving_checks import seqlens_of_int
    lens = seqlens_of_int(cache_seqlens, q)
    Sq, new = int(q.shape[1]), 0 if k is None else int(k.shape[1])
    last = lens + (new - 1)
    if gpu.is_torch_tensor(lens):
        start = (last.clamp(min=0) // C * C).to(lens.dtype)
    else:
        lens = np.asarray(lens)
        start = (np.maximum(last, 0) // C * C).astype(np.int32)
    if Sq > 1 or new > 1:
        first = lens + (new - Sq)
        ok = (first >= 0) & (first // C == last // C) & (start <= lens)
        if not bool(ok.all()):
            raise NotImplementedError(
                f"{_NAME}.{fn}: attention_chunk={C} with queries in more than one chunk (or "
                "before the first key, or a chunk starting among the new keys) is not "
                "supported by tessel's KV-cache call: split the call at the chunk boundary, "
                "or run the chunk through flash_attn_varlen_func")
    return lens, start


__all__ = ["flash_attn_func", "flash_attn_qkvpacked_func", "flash_attn_kvpacked_func",
           "flash_attn_varlen_func", "flash_attn_varlen_qkvpacked_func",
           "flash_attn_varlen_kvpacked_func", "flash_attn_with_kvcache"]
