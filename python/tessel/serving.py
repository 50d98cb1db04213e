"""Serving entry points: tessel.attention_varlen and tessel.attention_with_kvcache.

Both check their inputs (shapes, dtypes, lengths, H % Hkv; errors name the argument, helpers in
serving_checks.py) and launch the DSL kernels of serving_kernels.py: numpy arrays on the CPU
interpreter, CUDA torch tensors on the GPU. Neither has a backward yet, so inputs that require
grad are refused.

On the GPU the default blocks are the ones every lowering can take (the reference lowering's:
at most 64 rows at head dim <= 64, 32 above); block_m = block_n = 64 reaches the fast paths for
varlen and the contiguous cache. Decoding against a cache (few query rows per KV group) takes
the split-KV path of serving_decode.py: GQA packing and flash-decoding's split of the keys,
merged by a DSL program (docs/dev/serving.md).
"""

import numpy as np

from . import cpu_tensors
from . import gpu
from . import kvcache_append
from . import serving_checks
from . import torch_ops
from . import serving_decode
from .attention import _first_columns, _pad_columns, call_with_value_head_dim, dv_kernel_takes, \
    pads_in_kernel, padded_head_dim, softmax_scale, value_head_dim_differs
from .grid import fold_grid
from .serving_checks import (_I32_MAX, _block_arg, _blocks, _check_heads, _check_index,
                             _check_same_dtype, _dtype_name, _fast_blocks, _kind, _launch, _out,
                             _refuse_grad, _strided, seqlens_of_int)
from .serving_kernels import kvcache_kernel, varlen_kernel


def _varlen_padded_dim(q, k, v):
    """The head dim a CUDA attention_varlen call runs at where the serving kernels' fast paths
    (serving_checks.VARLEN_FAST_HEAD_DIMS: 64, 128 and 256) do not take its own: the next of
    them for fp16/bf16 head dims below the largest (32, 80, 96, 192, …; zero columns, exact,
    differentiable), which the reference lowering ran at a few per cent of the fast path's
    speed. None otherwise (padding to a head dim no fast path takes would gain nothing)."""
    if not all(gpu.is_torch_tensor(x) and x.is_cuda and len(x.shape) == 3 for x in (q, k, v)):
        return None
    if not q.shape[-1] == k.shape[-1] == v.shape[-1] or not q.dtype == k.dtype == v.dtype:
        return None
    Dp = padded_head_dim(q.shape[-1], gpu.torch_dtype_name(q))
    if Dp not in serving_checks.VARLEN_FAST_HEAD_DIMS:
        return None
    return None if _varlen_native(q) and not cpu_tensors.needs_grad(q, k, v) else Dp


def _varlen_block_dim(q, k, v, Dp):
    """Whether an attention_varlen call that would be padded to Dp runs the varlen kernel with
    blocks Dp wide instead (serving_checks.VARLEN_BLOCK_HEAD_DIM): CUDA, v of q's head dim, a
    multiple of 8; with gradients wanted only where the block-sparse backward that
    varlen_backward runs takes the same DB (VARLEN_BLOCK_HEAD_DIM_GRAD,
    backward.sparse_block_dim), else the padded copies are what that backward reads."""
    if not (serving_checks.VARLEN_BLOCK_HEAD_DIM and gpu.is_torch_tensor(q) and
            getattr(q, "is_cuda", False) and pads_in_kernel(q, v, Dp)):
        return False
    if cpu_tensors.needs_grad(q, k, v):
        from .backward import sparse_block_dim       # (o and dO will have q's shape)
        return serving_checks.VARLEN_BLOCK_HEAD_DIM_GRAD and sparse_block_dim(q, k, v, q, q) == Dp
    return True


def _varlen_dv(q, k, v):
    """Whether an attention_varlen call whose v has a head dim of its own runs the varlen
    kernel's DV (serving_checks.VARLEN_VALUE_HEAD_DIM_KERNEL) instead of padding."""
    return serving_checks.VARLEN_VALUE_HEAD_DIM_KERNEL and dv_kernel_takes(
        q, k, v, serving_checks.VARLEN_FAST_HEAD_DIMS, serving_checks.VARLEN_NATIVE_HEAD_DIMS)


def _varlen_dv_grad(q, k, v, window_size, softcap, alibi_slopes):
    """Whether an attention_varlen call that wants gradients keeps its narrower v at its own
    width, forward and backward (varlen_backward.takes_value_dim), instead of padding."""
    if not (gpu.is_torch_tensor(q) and cpu_tensors.needs_grad(q, k, v)):
        return False
    from .varlen_backward import takes_value_dim
    return takes_value_dim(q, k, v, window_size, softcap, alibi_slopes)


def _varlen_native(q):
    """Whether a CUDA attention_varlen call runs q's head dim as it is on the fast paths where
    it would be padded (serving_checks.VARLEN_NATIVE_HEAD_DIMS, q's chip)."""
    from .attention import _chip_for_blocks
    dims = serving_checks.VARLEN_NATIVE_HEAD_DIMS.get(_chip_for_blocks(q), ())
    return q.shape[-1] in dims


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                     causal=False, scale=None, return_lse=False, block_m=None, block_n=None,
                     window_size=None, softcap=None, alibi_slopes=None, block_table=None,
                     seqused_k=None):
    """Attention over a batch of sequences of different lengths, packed without padding.

    FlashAttention-2's ``flash_attn_varlen_func`` convention.

    Arguments:
        q: [total_q, H, D], the queries of every sequence one after the other.
        k, v: [total_k, Hkv, D]; Hkv must divide H (grouped-query / multi-query attention:
            query head h reads key/value head h // (H / Hkv)). v's head dim may differ from
            D (as tessel.attention's: the smaller side padded with zero columns; o then has
            v's).
        cu_seqlens_q, cu_seqlens_k: int32 [B + 1], the cumulative lengths: sequence b holds
            rows cu_seqlens[b] .. cu_seqlens[b + 1] - 1.
        max_seqlen_q: the longest query sequence (sets the grid: rows of longer sequences
            beyond it are not computed). max_seqlen_k: the longest key sequence (checked on
            numpy input; the kernel reads each sequence's own length).
        causal: bottom-right aligned, as in FlashAttention >= 2.1: query i of a sequence with
            nq queries and nk keys sees key j when i + nk - nq >= j (the last query sees every
            key). Rows that see no key (nq > nk) give 0 and lse -inf.
        scale: of the scores, 1/sqrt(D) by default.
        return_lse: also return the log-sum-exp of each row's scores, float32 [H, total_q].
        block_m, block_n: the query and key block sizes (powers of two >= 16); by default
            64x64 on CUDA at fp16/bf16 and head dim 64, 128 or 256 (the tensor-core paths; on
            sm_90a 128x128 at 128 and 128x64 at 256: serving_checks.VARLEN_BLOCKS), else
            ones the reference lowering takes (docs/dev/serving.md).
        window_size: FlashAttention's sliding window ``(left, right)`` (-1: no bound): query i
            sees keys ``i + nk - nq - left`` to ``i + nk - nq + right`` (bottom-right aligned,
            as ``causal``).
        softcap: FlashAttention's soft cap (0 or None: none).
        alibi_slopes: FlashAttention's ALiBi: float32 ``[H]`` or ``[B, H]`` (where q is), the
            bias ``-slope · |i' - j|`` added to the (capped) scores, i' the query's position
            bottom-right aligned as ``causal``'s.
        block_table: int32 ``[B, max_pages]``: k and v are then a paged KV cache
            ``[num_pages, page_size, Hkv, D]`` (as attention_with_kvcache's) and sequence b's
            keys are its positions 0 .. n_b - 1 (key j in page block_table[b, j // page_size]):
            FlashAttention's flash_attn_varlen_func with block_table, a serving engine's batch
            of prefill chunks and decode steps in one call. No backward (inputs that require
            grad are refused).
        seqused_k: int32 ``[B]``, each sequence's key count n_b (FlashAttention-3's and
            vLLM's). With block_table: its keys are positions 0 .. n_b - 1 of its pages, and
            cu_seqlens_k may be None. Without: its keys are the first n_b rows of its span
            cu_seqlens_k[b] .. cu_seqlens_k[b + 1] - 1 (at most the span: more is a ValueError
            on numpy input, clamped to the span on the GPU); the rows after them are not read
            and get no gradient. Causal and the window are aligned to n_b. Without seqused_k,
            n_b = cu_seqlens_k[b + 1] - cu_seqlens_k[b] (FlashAttention-2's).

    numpy arrays (float32, float16, bf16 as uint16) and torch CPU tensors run on the CPU
    interpreter, CUDA torch tensors (fp16, bf16, fp32) on the GPU. q, k and v are read in place
    through their strides (a row is H·D elements); nothing is copied, but for fp16/bf16 CUDA
    head dims below 256 other than 64 and 128, which run padded with zero columns to 64, 128 or
    256 (the fast paths' head dims; exact, differentiable; without gradients and at multiples
    of 8 the padding is inside the kernel, nothing copied). Torch tensors
    that require grad (grad mode on) get o and lse with a grad_fn: the backward runs the dense
    backward programs over the packed rows under a per-sequence mask and its block mask
    (python/tessel/varlen_backward.py); numpy arrays that require grad are refused.

    Returns:
        o ``[total_q, H, D]`` like q, or ``(o, lse)`` with return_lse.

    Raises:
        ValueError: shapes, lengths or cumulative lengths that do not fit together.
        TypeError: mixed kinds or dtypes of q, k and v, or index arrays that are not int32.
        NotImplementedError: numpy inputs that require grad.
    """
    fn = "attention_varlen"
    if torch_ops.compiling(q):          # under torch.compile: one node of the graph
        return torch_ops.attention_varlen(
            q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale,
            return_lse, block_m, block_n, window_size, softcap, alibi_slopes, block_table,
            seqused_k)
    if block_table is not None:
        from .varlen_cache import attention_varlen_paged
        return attention_varlen_paged(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                      max_seqlen_k, block_table, seqused_k, causal, scale,
                                      return_lse, block_m, block_n, window_size, softcap,
                                      alibi_slopes)
    if seqused_k is not None and gpu.is_torch_tensor(q) and q.is_cuda and \
            not serving_checks.PACKED_SEQUSED_CUDA:
        raise NotImplementedError(
            f"tessel.{fn}: seqused_k without block_table on CUDA tensors waits for its GPU "
            "check (serving_checks.PACKED_SEQUSED_CUDA); give cu_seqlens_k the used keys, or a "
            "paged cache with block_table, meanwhile")
    dv = value_head_dim_differs(q, k, v, rank=3)
    if dv and not _varlen_dv(q, k, v) and not _varlen_dv_grad(q, k, v, window_size, softcap,
                                                              alibi_slopes):
        return call_with_value_head_dim(
            attention_varlen, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
            causal=causal, scale=scale, return_lse=return_lse, block_m=block_m, block_n=block_n,
            window_size=window_size, softcap=softcap, alibi_slopes=alibi_slopes,
            seqused_k=seqused_k)
    Dp = _varlen_padded_dim(q, k, v)
    DB = 0
    if _varlen_block_dim(q, k, v, Dp):
        DB, Dp = Dp, None                     # padded inside the kernel, not copied
    if Dp is not None:
        res = attention_varlen(
            *(_pad_columns(x, Dp) for x in (q, k, v)), cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
            max_seqlen_k, causal=causal, scale=softmax_scale(scale, q.shape[-1]),
            return_lse=return_lse, block_m=block_m, block_n=block_n, window_size=window_size,
            softcap=softcap, alibi_slopes=alibi_slopes, seqused_k=seqused_k)
        return _first_columns(res, q.shape[-1], return_lse)
    named = (("q", q), ("k", k), ("v", v))
    if gpu.is_torch_tensor(q) and cpu_tensors.needs_grad(q, k, v):
        from .varlen_backward import attention_varlen_with_grad
        return attention_varlen_with_grad(
            q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, return_lse,
            dict(causal=causal, scale=scale, block_m=block_m, block_n=block_n,
                 window_size=window_size, softcap=softcap, alibi_slopes=alibi_slopes),
            seqused_k)
    if cpu_tensors.is_cpu_tensor(q):
        cpu_tensors.check_dtypes(fn, named)
        return cpu_tensors.call(
            attention_varlen, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
            causal=causal, scale=scale, return_lse=return_lse, block_m=block_m,
            block_n=block_n, window_size=window_size, softcap=softcap, alibi_slopes=alibi_slopes,
            seqused_k=seqused_k)
    kind = _kind(fn, named)
    _refuse_grad(fn, named)
    _check_same_dtype(fn, named)
    for n, x in named:
        if len(x.shape) != 3:
            raise ValueError(f"tessel.{fn}: {n} must have shape [total, heads, head_dim], got "
                             f"{tuple(x.shape)}")
    total_q, H, D = q.shape
    total_k, Hkv, Dk = k.shape
    Dv = v.shape[-1]
    if tuple(v.shape) != tuple(k.shape) and not dv:
        raise ValueError(f"tessel.{fn}: k {tuple(k.shape)} and v {tuple(v.shape)} differ in shape")
    if Dk != D:
        raise ValueError(f"tessel.{fn}: q has head dim {D}, k and v {Dk}")
    _check_heads(fn, H, Hkv, D)
    cu_q = _check_index(fn, "cu_seqlens_q", cu_seqlens_q, 1, kind, q)
    cu_k = _check_index(fn, "cu_seqlens_k", cu_seqlens_k, 1, kind, q)
    if cu_q.shape[0] != cu_k.shape[0] or cu_q.shape[0] < 1:
        raise ValueError(f"tessel.{fn}: cu_seqlens_q has {cu_q.shape[0]} entries and "
                         f"cu_seqlens_k {cu_k.shape[0]}: both must be B + 1 for B sequences")
    B = cu_q.shape[0] - 1
    for name, m in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 0:
            raise ValueError(f"tessel.{fn}: {name} must be a non-negative int, got {m!r}")
    if kind == "numpy":
        for name, cu, total, mx in (("cu_seqlens_q", cu_q, total_q, max_seqlen_q),
                                    ("cu_seqlens_k", cu_k, total_k, max_seqlen_k)):
            lengths = np.diff(cu)
            if cu[0] != 0 or (lengths < 0).any() or cu[-1] > total:
                raise ValueError(f"tessel.{fn}: {name} must start at 0, never decrease and end "
                                 f"at most at {total} (the rows of "
                                 f"{'q' if name.endswith('q') else 'k'}), got {cu.tolist()}")
            if lengths.size and lengths.max() > mx:
                raise ValueError(f"tessel.{fn}: sequence {int(lengths.argmax())} has "
                                 f"{int(lengths.max())} rows, more than "
                                 f"max_seqlen_{name[-1]} = {mx}")
    if seqused_k is not None:
        cu_k = serving_checks.key_bounds(fn, kind, q, cu_k, seqused_k)
    if H * max(total_q, 1) > _I32_MAX or max(total_q, total_k) * H * D > 2**40:
        raise ValueError(f"tessel.{fn}: {total_q} query rows x {H} heads are too many for "
                         "32-bit row indices")
    scale = softmax_scale(scale, D)
    (q, q_rs, q_hs), (k, k_rs, k_hs), (v, v_rs, v_hs) = (_strided(x) for x in (q, k, v))
    dims = serving_checks.VARLEN_FAST_HEAD_DIMS
    if kind == "cuda" and D not in dims and _varlen_native(q):   # (the chip asked only then)
        dims += (D,)
    fast = _fast_blocks(kind, _dtype_name(q), DB or D, (q_rs, q_hs, k_rs, k_hs, v_rs, v_hs),
                        dims)
    if fast and kind == "cuda" and Dv == D and serving_checks.VARLEN_BLOCKS:
        from .attention import _chip_for_blocks
        fast = serving_checks.varlen_blocks(_chip_for_blocks(q), DB or D, fast)
    BM, BN = fast or _blocks(kind, max(D, Dv, DB), _dtype_name(q), max_seqlen_q, max_seqlen_k)
    BM, BN = _block_arg(fn, "block_m", block_m, BM), _block_arg(fn, "block_n", block_n, BN)
    o = _out(kind, q, (total_q, H, Dv))
    lse = _out(kind, q, (H, total_q), np.float32)
    grid, tiles, tx = serving_checks.varlen_grid(kind, cu_q, B, total_q, int(max_seqlen_q), BM,
                                                 H)
    args = (q, k, v, o, lse, cu_q, cu_k, B, total_q, total_k, H, Hkv, int(max_seqlen_q), scale,
            *tiles)
    cx = dict(q_rs=q_rs, q_hs=q_hs, k_rs=k_rs, k_hs=k_hs, v_rs=v_rs, v_hs=v_hs, D=D,
              BLOCK_M=BM, BLOCK_N=BN, CAUSAL=bool(causal),
              **_position_mods(fn, causal, window_size, softcap, alibi_slopes, q, (B, H)),
              **({"DV": Dv} if Dv != D else {}), **({"DB": DB} if DB else {}),
              **({"USED_K": True} if seqused_k is not None else {}), **tx)
    _launch(varlen_kernel, grid, args, cx)
    return (o, lse) if return_lse else o


def attention_with_kvcache(q, k_cache, v_cache, cache_seqlens, block_table=None, causal=False,
                           scale=None, return_lse=False, block_m=None, block_n=None,
                           num_splits=None, window_size=None, softcap=None, alibi_slopes=None,
                           k=None, v=None, rotary_cos=None, rotary_sin=None,
                           rotary_interleaved=True, cache_batch_idx=None, cache_leftpad=None):
    """Attention of new queries against a KV cache, contiguous or paged.

    FlashAttention-2's ``flash_attn_with_kvcache`` convention, new keys and values (``k=``,
    ``v=``) appended into the cache in place as there.

    Arguments:
        q: [B, Sq, H, D], Sq new query tokens per sequence (1 for a decode step).
        k_cache, v_cache: contiguous [B, S, Hkv, D], or paged [num_pages, page_size, Hkv, D]
            with block_table. Hkv must divide H (GQA / MQA).
        cache_seqlens: int32 [B], the number of valid keys of each sequence (at most S, or
            max_pages·page_size); the keys past it are never read. An int: that many for
            every sequence (as FlashAttention's ``flash_attn_with_kvcache``).
        block_table: int32 [B, max_pages] for a paged cache: key j of sequence b lives in page
            block_table[b, j // page_size], row j % page_size. Pages may be in any order; a page
            number outside [0, num_pages) reads as zeros (never out of bounds). Any page_size
            (1 to 256 are the tested sizes; vLLM's default is 16): a key block spans pages
            where they are shorter than it, each row looked up in the table.
        causal: bottom-right aligned, as in FlashAttention: query i of Sq sees key j when
            i + cache_seqlens[b] - Sq >= j (the last query sees every key).
        scale: of the scores, 1/sqrt(D) by default.
        return_lse: also return the log-sum-exp, float32 [B, H, Sq].
        block_m, block_n: the query and key block sizes (powers of two >= 16); by default
            64x64 where the tensor-core paths take the call (CUDA fp16/bf16, head dim 64,
            128 or 256; other multiples of 8 in blocks of the next of these, the extra columns
            read as 0 inside the kernel, the cache not copied), else ones the reference
            lowering takes. A page that block_n divides is
            looked up once per key block, others row by row. On the split-KV path
            block_m counts packed rows (query heads of a group × query positions).
        num_splits: how many chunks each sequence's keys are split into (flash-decoding), as
            in FlashAttention. None (default): a heuristic from the GPU's SM count (132, the
            H200's, on the interpreter), B·Hkv and the cache's capacity (S, or
            max_pages·page_size), used when a KV group's query rows H/Hkv·Sq are at most 64
            (decode) and the capacity is at least 1024 keys; longer query sides run one
            program per query block and head. Paged caches are split as contiguous ones
            (each key block's page, or each row's, looked up in the key loop). 1: no split,
            one program per (query block, batch, query head). n > 1: n splits.
        window_size: FlashAttention's sliding window ``(left, right)`` (-1: no bound): query i
            sees keys ``i + cache_seqlens[b] - Sq - left`` to ``... + right`` (bottom-right
            aligned, as ``causal``; Mistral's decode: ``(4096, 0)``).
        softcap: FlashAttention's soft cap (0 or None: none).
        alibi_slopes: FlashAttention's ALiBi: float32 ``[H]`` or ``[B, H]`` (where q is), the
            bias ``-slope · |i' - j|`` added to the (capped) scores, i' the query's position
            bottom-right aligned as ``causal``'s.
        k, v: new keys and values ``[B, Sk, Hkv, D]`` (both or neither), written into the cache
            in place at positions ``cache_seqlens[b]`` to ``cache_seqlens[b] + Sk - 1`` (of the
            sequence's pages when paged) before the attention, which then sees
            ``cache_seqlens + Sk`` keys; cache_seqlens is not changed (FlashAttention's
            ``flash_attn_with_kvcache(k=, v=)``). The cache must be laid out as the kernels
            read it (a copy could not be written back). Positions past the cache's capacity
            are a ValueError on the CPU; on the GPU they are not written.
        rotary_cos, rotary_sin: FlashAttention's rotary tables ``[seqlen_ro, rotary_dim / 2]``
            (rotary_dim a multiple of 16, at most D): k (when given) is rotated at positions
            ``cache_seqlens[b] + i`` before it is written, q at the same positions when causal
            or with a window, else every query at ``cache_seqlens[b]`` (FlashAttention's rule);
            the head dims past rotary_dim are left as they are. The caller's q and k are not
            changed.
        rotary_interleaved: pairs of dims (0, 1), (2, 3), ... (True, FlashAttention's default,
            GPT-J) or (i, i + rotary_dim / 2) (False, GPT-NeoX).
        cache_batch_idx: int32 ``[B]``, the contiguous cache's sequence that q's batch entry b
            reads (and k, v are written to): k_cache is then ``[B_cache, S, Hkv, D]`` with any
            B_cache (FlashAttention's; not with block_table, which already says where each
            sequence lives). An index outside [0, B_cache) reads as zeros (a ValueError on the
            CPU). Two entries naming one sequence and writing k, v into it: either's rows win.
        cache_leftpad: int32 ``[B]``, FlashAttention's left padding: sequence b's keys start at
            cache row cache_leftpad[b]; the rows before it are never read. Positions are the
            cache's rows, so causal, the window, ALiBi, rotary and the append at cache_seqlens
            are as without it.

    Split-KV path: one program per (split, batch, KV head) whose query rows are the group's
    heads × positions (GQA packing: each KV head's cache is read once per split), writing a
    float32 partial output and its LSE; a second DSL program merges the splits by their LSEs
    (docs/dev/serving.md). With one split and Sq = 1 (or H = Hkv) the first program writes o
    directly.

    numpy arrays and torch CPU tensors run on the CPU interpreter, CUDA torch tensors on the
    GPU. No backward.

    Returns:
        o ``[B, Sq, H, D]`` like q, or ``(o, lse)`` with return_lse.

    Raises:
        ValueError: shapes, lengths or page numbers that do not fit together; num_splits not
            None or an int >= 1.
        TypeError: mixed kinds or dtypes of q and the cache, or index arrays that are not int32.
        NotImplementedError: inputs that require grad.
    """
    fn = "attention_with_kvcache"
    if torch_ops.compiling(q):          # under torch.compile: one node of the graph
        return torch_ops.attention_with_kvcache(
            q, k_cache, v_cache, cache_seqlens, block_table, causal, scale, return_lse, block_m,
            block_n, num_splits, window_size, softcap, alibi_slopes, k, v, rotary_cos,
            rotary_sin, rotary_interleaved, cache_batch_idx, cache_leftpad)
    cache_seqlens = seqlens_of_int(cache_seqlens, q)
    if cpu_tensors.is_cpu_tensor(q):
        named = (("q", q), ("k_cache", k_cache), ("v_cache", v_cache))
        cpu_tensors.refuse_grad(fn, named + _new_rows(k, v))
        cpu_tensors.check_dtypes(fn, named)
        return cpu_tensors.call(
            attention_with_kvcache, q, k_cache, v_cache, cache_seqlens, block_table,
            causal=causal, scale=scale, return_lse=return_lse, block_m=block_m,
            block_n=block_n, num_splits=num_splits, window_size=window_size, softcap=softcap,
            alibi_slopes=alibi_slopes, k=k, v=v, rotary_cos=rotary_cos, rotary_sin=rotary_sin,
            rotary_interleaved=rotary_interleaved, cache_batch_idx=cache_batch_idx,
            cache_leftpad=cache_leftpad)
    if cache_batch_idx is not None and block_table is not None:
        raise ValueError(f"tessel.{fn}: cache_batch_idx picks sequences of a contiguous cache; "
                         "a paged cache's block_table already says where each one lives")
    # cache_batch_idx makes the contiguous cache pages of S rows, one a sequence (below): the
    # table a plan's replay reads.
    given = (q, k_cache, v_cache, cache_seqlens,
             block_table if cache_batch_idx is None else cache_batch_idx, cache_leftpad,
             k, v, rotary_cos, rotary_sin)
    # ALiBi's mods hold the call's slopes (made below, once q's shape is checked): no plan.
    mods = {} if alibi_slopes is not None else _position_mods(fn, causal, window_size, softcap)
    key = None if alibi_slopes is not None else _call_signature(
        given, (causal, scale, return_lse, block_m, block_n, num_splits, mods.get("SCORE_MOD"),
                mods.get("MASK_MOD"), cache_batch_idx is not None, rotary_interleaved))
    if key is not None:
        replay = _PLANS.get(key)
        if replay is not None:
            return replay(*given)
    named = (("q", q), ("k_cache", k_cache), ("v_cache", v_cache))
    kind = _kind(fn, named)
    _refuse_grad(fn, named + _new_rows(k, v))
    _check_same_dtype(fn, named)
    for n, x in named:
        if len(x.shape) != 4:
            raise ValueError(f"tessel.{fn}: {n} must have 4 dimensions, got {tuple(x.shape)}")
    B, Sq, H, D = q.shape
    if alibi_slopes is not None:
        mods = _position_mods(fn, causal, window_size, softcap, alibi_slopes, q, (B, H))
    if cache_leftpad is not None and kind == "cuda" and not serving_checks.LEFTPAD_CHECKED:
        raise NotImplementedError(
            f"tessel.{fn}: cache_leftpad on CUDA tensors waits for its GPU check "
            "(serving_checks.LEFTPAD_CHECKED)")
    leftpad = None if cache_leftpad is None else \
        _check_index(fn, "cache_leftpad", cache_leftpad, 1, kind, q)
    if leftpad is not None and leftpad.shape[0] != B:
        raise ValueError(f"tessel.{fn}: cache_leftpad has {leftpad.shape[0]} entries for a "
                         f"batch of {B}")
    if tuple(v_cache.shape) != tuple(k_cache.shape):
        # A v of its own head dim would be padded here a whole cache a call: refused, said so.
        own = tuple(v_cache.shape[:-1]) == tuple(k_cache.shape[:-1])
        raise ValueError(f"tessel.{fn}: k_cache {tuple(k_cache.shape)} and v_cache "
                         f"{tuple(v_cache.shape)} differ in shape" +
                         (": the KV cache needs one head dim (tessel.attention and "
                          "attention_varlen take a v of its own)" if own else ""))
    n0, S, Hkv, Dk = k_cache.shape
    if Dk != D:
        raise ValueError(f"tessel.{fn}: q has head dim {D}, the cache {Dk}")
    _check_heads(fn, H, Hkv, D)
    seqlens = _check_index(fn, "cache_seqlens", cache_seqlens, 1, kind, q)
    if seqlens.shape[0] != B:
        raise ValueError(f"tessel.{fn}: cache_seqlens has {seqlens.shape[0]} entries for a batch "
                         f"of {B}")
    if block_table is None and cache_batch_idx is None:
        if n0 != B:
            raise ValueError(f"tessel.{fn}: a contiguous cache [B, S, Hkv, D] needs B = {B} "
                             f"(q's batch), got k_cache {tuple(k_cache.shape)}; a paged cache "
                             "needs block_table")
        page, max_pages, cache_rows = 0, 1, S
        table = seqlens                      # not read (PAGE = 0): any int32 buffer
        limit = S
    elif block_table is None:
        # The contiguous cache as pages of S rows, one a sequence, and cache_batch_idx the page
        # table [B, 1]: the paged kernels read and append with no copy.
        table = _check_index(fn, "cache_batch_idx", cache_batch_idx, 1, kind, q)
        if table.shape[0] != B:
            raise ValueError(f"tessel.{fn}: cache_batch_idx has {table.shape[0]} entries for a "
                             f"batch of {B}")
        if S == 0:
            raise ValueError(f"tessel.{fn}: a cache of 0 rows a sequence has nothing for "
                             "cache_batch_idx to pick")
        if kind == "numpy" and ((table < 0) | (table >= n0)).any():
            bad = int(np.argmax((table < 0) | (table >= n0)))
            raise ValueError(f"tessel.{fn}: cache_batch_idx[{bad}] = {int(table[bad])} is not a "
                             f"sequence of the cache (0 to {n0 - 1})")
        page, max_pages, cache_rows = S, 1, n0 * S
        limit = S
    else:
        table = _check_index(fn, "block_table", block_table, 2, kind, q)
        if table.shape[0] != B:
            raise ValueError(f"tessel.{fn}: block_table has {table.shape[0]} rows for a batch "
                             f"of {B}")
        page, max_pages, cache_rows = S, table.shape[1], n0 * S
        if page == 0:
            raise ValueError(f"tessel.{fn}: page_size (k_cache.shape[1]) must be positive")
        limit = max_pages * page
    if kind == "numpy":
        if (seqlens < 0).any() or (seqlens > limit).any():
            bad = int(np.argmax((seqlens < 0) | (seqlens > limit)))
            raise ValueError(f"tessel.{fn}: cache_seqlens[{bad}] = {int(seqlens[bad])} is outside "
                             f"[0, {limit}] (the keys the cache holds per sequence)")
        if cache_leftpad is not None and ((leftpad < 0) | (leftpad > seqlens)).any():
            bad = int(np.argmax((leftpad < 0) | (leftpad > seqlens)))
            raise ValueError(f"tessel.{fn}: cache_leftpad[{bad}] = {int(leftpad[bad])} is "
                             f"outside [0, cache_seqlens[{bad}]]")
        if block_table is not None and B and max_pages:
            used = [(b, p) for b in range(B) for p in range(-(-int(seqlens[b]) // page))]
            bad = [(b, p) for b, p in used if not 0 <= table[b, p] < n0]
            if bad:
                b, p = bad[0]
                raise ValueError(f"tessel.{fn}: block_table[{b}, {p}] = {int(table[b, p])} is not "
                                 f"a page of the cache (0 to {n0 - 1})")
    if B * H * max(Sq, 1) > _I32_MAX or max(B * S, cache_rows) > _I32_MAX:
        raise ValueError(f"tessel.{fn}: too many rows for 32-bit row indices")
    scale = softmax_scale(scale, D)
    rotary = turn_q = add = None
    if rotary_cos is not None or rotary_sin is not None:
        # FlashAttention's rule: q at the new tokens' positions when causal or local.
        local = window_size is not None and tuple(window_size) != (-1, -1)
        rotary = (rotary_cos, rotary_sin, rotary_interleaved)
        q, turn_q = kvcache_append.rotate(fn, kind, "q", q, *rotary, seqlens,
                                          bool(causal) or local)
    caches = (k_cache, v_cache)
    (q, q_rs, q_hs), (k_cache, k_rs, k_hs), (v_cache, v_rs, v_hs) = (
        _strided(x) for x in (q, k_cache, v_cache))
    if k is not None or v is not None:
        seqlens, add = kvcache_append.append(fn, kind, k, v, k_cache, v_cache, caches,
                                             (k_rs, k_hs, v_rs, v_hs), seqlens, table,
                                             page != 0, B, Hkv, D, page, max_pages, limit,
                                             rotary)
    G = H // Hkv
    if num_splits is not None and (isinstance(num_splits, bool)
                                   or not isinstance(num_splits, (int, np.integer))
                                   or not 1 <= num_splits <= serving_decode.MAX_SPLITS * 8):
        raise ValueError(f"tessel.{fn}: num_splits must be None (a heuristic) or an int from 1 "
                         f"to {serving_decode.MAX_SPLITS * 8}, got {num_splits!r}")
    # The split-KV path: asked for (num_splits > 1), or by default when a group's query rows
    # are few (decode); num_splits = 1 is the one-program-per-query-head kernel.
    split = (num_splits is None and G * Sq <= serving_decode.MAX_PACKED_ROWS) or \
        (num_splits is not None and num_splits > 1)
    if split and not serving_decode.fits_i32(B, Sq, H, D, q_rs, num_splits or 1):
        if num_splits is not None:
            raise ValueError(f"tessel.{fn}: {num_splits} splits of {B}x{Sq}x{H}x{D} queries "
                             "need a workspace too large for 32-bit offsets")
        split = False
    BM, BN = _blocks(kind, D, _dtype_name(q), G * Sq if split else Sq, limit)
    # The fast paths' blocks where they take the call: the cache read through its strides, and
    # q too unless the split path packs it (a contiguous copy).
    strides = (k_rs, k_hs, v_rs, v_hs) + (() if split else (q_rs, q_hs))
    # A head dim they do not take runs at the next one, inside the kernels (DB): not copied.
    DB = serving_checks.kvcache_block_head_dim(kind, _dtype_name(q), D,
                                               serving_checks.KVCACHE_FAST_HEAD_DIMS)
    fast = _fast_blocks(kind, _dtype_name(q), DB or D, strides,
                        serving_checks.KVCACHE_FAST_HEAD_DIMS)
    if not split:
        fast = serving_checks.cache_kernel_blocks(fast, DB or D, page)
    BM, BN = fast or (BM, BN)
    DB = DB if fast else 0
    BM, BN = _block_arg(fn, "block_m", block_m, BM), _block_arg(fn, "block_n", block_n, BN)
    o = _out(kind, q, tuple(q.shape))
    lse = _out(kind, q, (B, H, Sq), np.float32)
    if split:
        short = num_splits is None and limit < serving_decode.MIN_KEYS_TO_SPLIT
        n = int(num_splits or 0) or (1 if short else serving_decode.num_splits_heuristic(
            B * Hkv * -(-G * Sq // BM), -(-limit // BN), serving_decode.num_sms(q)))
        if not serving_decode.fits_i32(B, Sq, H, D, q_rs, n):
            n = 1
        run = serving_decode.launch(
            q, q_rs, q_hs, k_cache, v_cache, (k_rs, k_hs, v_rs, v_hs), o, lse, seqlens, table,
            B=B, Sq=Sq, H=H, Hkv=Hkv, D=D, page=page, max_pages=max_pages,
            cache_rows=cache_rows, scale=scale, causal=causal, n_splits=n,
            block_m=BM, block_n=BN, score_mod=mods.get("SCORE_MOD"),
            mask_mod=mods.get("MASK_MOD"), block_dim=DB, starts=leftpad)
    else:
        grid = fold_grid(-(-Sq // BM), B * H)
        scalars = (B, Sq, cache_rows, H, Hkv, max_pages, scale)
        cx = dict(q_rs=q_rs, q_hs=q_hs, k_rs=k_rs, k_hs=k_hs, v_rs=v_rs, v_hs=v_hs, D=D,
                  BLOCK_M=BM, BLOCK_N=BN, PAGE=page, CAUSAL=bool(causal), **mods)
        if DB:
            cx["DB"] = DB
        if leftpad is not None:
            cx["LEFTPAD"] = True

        def run(q, k_cache, v_cache, o, lse, seqlens, table, starts):
            # Without LEFTPAD the kernel does not read `starts`: any int32 buffer.
            _launch(kvcache_kernel, grid, (q, k_cache, v_cache, o, lse, seqlens, table) +
                    scalars + (seqlens if starts is None else starts,), cx)
        run(q, k_cache, v_cache, o, lse, seqlens, table, leftpad)
    if key is not None:
        kept = (q, k_cache, v_cache, seqlens, table if page else None, leftpad)
        # A rotated q is a new tensor made from the caller's as it is: nothing to copy first.
        copied = [x is not y and (i or turn_q is None) for i, (x, y) in enumerate(zip(given,
                                                                                      kept))]
        _remember(key, run, copied, (B, H, Sq), return_lse, turn_q, add)
    return (o, lse) if return_lse else o


def _new_rows(k, v):
    """k= and v= as (name, tensor) pairs where given: refused with q and the cache where they
    require grad (written into the cache, they would lose it)."""
    return tuple((n, x) for n, x in (("k", k), ("v", v)) if x is not None)


def _position_mods(fn, causal, window_size, softcap, alibi_slopes=None, q=None,
                   batch_heads=None):
    """The kernels' SCORE_MOD / MASK_MOD constexprs for FlashAttention's window_size, softcap
    and alibi_slopes (flash_mods.py; empty without them). Their positions are the kernels' q_idx
    and kv_idx, bottom-right aligned, and h each row's query head (the split-KV program's rows
    are several heads: it passes them as a tile). alibi_slopes is checked against batch_heads
    (B, H) and q's placement; its mods hold the call's slopes, so they are made per call (the
    kernel is the same: the slopes are a captured argument)."""
    if alibi_slopes is not None:
        from .attention import _as_jit
        from .flash_mods import flash_mods
        score_mod, mask_mod = flash_mods(q, causal, window_size, softcap, alibi_slopes, None,
                                         None, batch_heads, fn)
        return {name: _as_jit(m, role) for name, m, role in (
            ("SCORE_MOD", score_mod, "score_mod"), ("MASK_MOD", mask_mod, "mask_mod"))
            if m is not None}
    if window_size is None and softcap is None:
        return {}
    try:                                  # a decode loop asks again at every call: made once
        key = (bool(causal), tuple(window_size) if window_size is not None else None, softcap)
        made = _MODS.get(key)
    except TypeError:                     # not hashable: checked and refused below
        key, made = None, None
    if made is not None:
        return made
    from .attention import _as_jit
    from .flash_mods import flash_mods
    score_mod, mask_mod = flash_mods(None, causal, window_size, softcap, None, None, None)
    mods = {}
    if score_mod is not None:
        mods["SCORE_MOD"] = _as_jit(score_mod, "score_mod")
    if mask_mod is not None:
        mods["MASK_MOD"] = _as_jit(mask_mod, "mask_mod")
    if key is not None:
        if len(_MODS) >= 64:
            _MODS.clear()
        _MODS[key] = mods
    return mods


_MODS = {}      # _position_mods' results by (causal, window_size, softcap)


#: attention_with_kvcache's plans for CUDA calls, by call signature (every tensor's shape,
#: strides, dtype and device, and the options): a decode loop repeats one signature, and the
#: checks and decisions of a call cost more host time than the GPU work at 1k keys (measured
#: on the H200's host: 63 µs a call back to back, against cuDNN's 43). A plan keeps what the
#: signature decides — copies, blocks, splits, grids, the launches' arguments — so a repeated
#: call allocates its outputs and launches. Every check depends on the signature only (CUDA
#: values such as cache_seqlens are never read on the host), so a call that passed them once
#: passes them again.
_PLANS = {}
_MAX_PLANS = 256


def _call_signature(tensors, options):
    """The plan key of a CUDA call, or None (numpy arrays, inputs that require grad, options
    other than plain values and the mods of FlashAttention's arguments: the checks run every
    time)."""
    sig = []
    for x in tensors:
        if x is None:
            sig.append(None)
            continue
        if not gpu.is_torch_tensor(x) or getattr(x, "requires_grad", True):
            return None
        try:
            sig.append((tuple(x.shape), x.stride(), x.dtype, x.device))
        except (AttributeError, TypeError):       # a tensor-like the checks will refuse
            return None
    from .frontend import ModFunction
    if not all(o is None or isinstance(o, (bool, int, float, np.integer, np.floating,
                                           ModFunction)) for o in options):
        return None
    # Switches that change a plan's launches (a plan must not outlive a change of them).
    return tuple(sig), options, serving_checks.SMALL_PAGE_256_BLOCK_N


def _remember(key, run, copied, out_shape, return_lse, turn_q=None, add=None):
    """Keeps the replay of a checked CUDA call: q, the cache, cache_seqlens, block_table and
    cache_leftpad copied where the first call copied them (`copied`: layouts the kernels do not
    read in place), q rotated (`turn_q`, kvcache_append.rotate's `again`) and k, v appended (`add`,
    kvcache_append.append's) where the first call did, outputs allocated, `run`'s launches."""
    torch = gpu.torch_module()

    def replay(*given):
        q, k_cache, v_cache, seqlens, block_table, starts = (
            x.contiguous() if c else x for x, c in zip(given[:6], copied))
        table = seqlens if block_table is None else block_table
        k, v, cos, sin = given[6:]
        if turn_q is not None:
            q = turn_q(q, cos, sin, seqlens)
        if add is not None:
            seqlens = add(k, v, k_cache, v_cache, seqlens, table, cos, sin)
        o = q.new_empty(q.shape)
        lse = q.new_empty(out_shape, dtype=torch.float32)
        run(q, k_cache, v_cache, o, lse, seqlens, table, starts)
        return (o, lse) if return_lse else o
    if len(_PLANS) >= _MAX_PLANS:
        _PLANS.clear()
    _PLANS[key] = replay
