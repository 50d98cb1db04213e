"""attention_varlen with `block_table` (FlashAttention's flash_attn_varlen_func over a paged KV
cache): the packed queries of sequences of mixed lengths — prefill chunks beside decode steps,
as a serving engine batches them — against each sequence's keys in a paged cache, in one
launch of serving_kernels.varlen_cache_kernel; decode steps (sequences of one query) by the
split-KV program instead, alone (max_seqlen_q = 1) or beside it (PACK_DECODE_ROWS).

Sequence b's queries are q's rows cu_seqlens_q[b] to cu_seqlens_q[b + 1] - 1; its keys are
positions 0 .. n_b - 1 of its pages (key j in page block_table[b, j // page_size], row
j % page_size), n_b = seqused_k[b] where given (FlashAttention-3's and vLLM's), else
cu_seqlens_k[b + 1] - cu_seqlens_k[b] (FlashAttention-2's). Causal, the window and ALiBi are
bottom-right aligned as in attention_varlen. The checks and the launch follow
attention_with_kvcache's one-program-per-query-block path (serving.py).
"""
import numpy as np

from . import cpu_tensors
from . import gpu
from . import serving_checks
from . import serving_decode
from .attention import softmax_scale
from .serving_checks import (_I32_MAX, _block_arg, _blocks, _check_heads, _check_index,
                             _check_same_dtype, _dtype_name, _fast_blocks, _kind, _launch, _out,
                             _refuse_grad, _strided)
from .serving_kernels import varlen_cache_kernel

# Whether CUDA tensors take block_table: on since test_serving_gpu.py's `test_varlen_paged`
# passed on an H100, 32/32 (mixed and decode-only batches, d64/96/128/256, pages of 16 and 64,
# fp16 and bf16), and the CUDA fuzzer's serving cases (bench/results/2026-12-07-s47/out).
CUDA_CHECKED = True

# Whether a mixed batch (max_seqlen_q > 1) computes its decode steps by the split-KV program
# (the query heads of a KV group packed as rows: each KV head read once a group, not once a
# query head in a 64-row block of one row) in a launch beside varlen_cache_kernel's for the
# other sequences: on the interpreter, and on CUDA since its GPU check (H100, forty-eighth
# session: test_serving_gpu.py `test_varlen_paged` 48/48 with mixed_packed; 60 decode steps
# and 4 chunks of 512, H32 Hkv8 d128, 1.27x the one launch at 4k keys, 1.40x at 16k:
# docs/bench/2026-12-07-h100-s48.md).
PACK_DECODE_ROWS = True
PACK_DECODE_ROWS_CUDA = True

# Whether a batch of a few queries a sequence (2 <= max_seqlen_q <= MAX_FEW_QUERIES: speculative
# decoding's draft tokens, a verification step) runs as attention_with_kvcache's decode does —
# each sequence's queries gathered right-aligned into [B, max_seqlen_q, H, D] (bottom-right
# causal holds for them; the slots before a shorter sequence's are computed and dropped), the
# split-KV program with the heads of a KV group packed as rows, each row's output gathered back —
# instead of one program per query head in a 64-row block. On the interpreter, and on CUDA since
# its GPU check (H100, forty-ninth session: `test_varlen_paged` spec_packed 16/16, the CUDA
# fuzzer's serving cases; 64 sequences of 5 queries, H32 Hkv8 d128, 1.14x the one launch at 4k
# keys, 1.41x at 16k: docs/bench/2026-12-07-h100-s49.md).
FEW_QUERIES_PACKED = True
FEW_QUERIES_PACKED_CUDA = True
MAX_FEW_QUERIES = 16


def attention_varlen_paged(q, k_cache, v_cache, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                           max_seqlen_k, block_table, seqused_k, causal, scale, return_lse,
                           block_m, block_n, window_size, softcap, alibi_slopes):
    """tessel.attention_varlen's paged form (its docstring says what the arguments mean)."""
    fn = "attention_varlen"
    named = (("q", q), ("k", k_cache), ("v", v_cache))
    if cpu_tensors.is_cpu_tensor(q):
        cpu_tensors.refuse_grad(fn, named)
        cpu_tensors.check_dtypes(fn, named)
        return cpu_tensors.call(
            attention_varlen_paged, q, k_cache, v_cache, cu_seqlens_q, cu_seqlens_k,
            max_seqlen_q, max_seqlen_k, block_table, seqused_k, causal, scale, return_lse,
            block_m, block_n, window_size, softcap, alibi_slopes)
    from .serving import _call_signature, _position_mods
    given = (q, k_cache, v_cache, cu_seqlens_q, cu_seqlens_k, block_table, seqused_k)
    # A serving loop repeats a signature every layer and step (max_seqlen_k, which grows each
    # step, decides nothing on CUDA once checked): its plan launches without the checks.
    mods = {} if alibi_slopes is not None else _position_mods(fn, causal, window_size, softcap)
    key = None if alibi_slopes is not None or not _plain_int(max_seqlen_k) else \
        _call_signature(given, (max_seqlen_q, causal, scale, return_lse, block_m, block_n,
                                mods.get("SCORE_MOD"), mods.get("MASK_MOD"),
                                PACK_DECODE_ROWS_CUDA, FEW_QUERIES_PACKED_CUDA))
    if key is not None:
        replay = _PLANS.get(key)
        if replay is not None:
            return replay(*given)
    kind = _kind(fn, named)
    _refuse_grad(fn, named)
    if kind == "cuda" and not CUDA_CHECKED:
        raise NotImplementedError(
            f"tessel.{fn}: block_table on CUDA tensors waits for its GPU check "
            "(varlen_cache.CUDA_CHECKED); attention_with_kvcache takes a paged cache meanwhile")
    _check_same_dtype(fn, named)
    if len(q.shape) != 3:
        raise ValueError(f"tessel.{fn}: q must have shape [total_q, heads, head_dim], got "
                         f"{tuple(q.shape)}")
    for n, x in named[1:]:
        if len(x.shape) != 4:
            raise ValueError(f"tessel.{fn}: with block_table, {n} is a paged cache [num_pages, "
                             f"page_size, Hkv, D], got {tuple(x.shape)}")
    if tuple(v_cache.shape) != tuple(k_cache.shape):
        raise ValueError(f"tessel.{fn}: the paged k {tuple(k_cache.shape)} and v "
                         f"{tuple(v_cache.shape)} differ in shape")
    total_q, H, D = q.shape
    num_pages, page, Hkv, Dk = k_cache.shape
    if Dk != D:
        raise ValueError(f"tessel.{fn}: q has head dim {D}, the cache {Dk}")
    _check_heads(fn, H, Hkv, D)
    if page == 0:
        raise ValueError(f"tessel.{fn}: page_size (k.shape[1]) must be positive")
    cu_q = _check_index(fn, "cu_seqlens_q", cu_seqlens_q, 1, kind, q)
    if cu_q.shape[0] < 1:
        raise ValueError(f"tessel.{fn}: cu_seqlens_q needs B + 1 entries for B sequences")
    B = cu_q.shape[0] - 1
    table = _check_index(fn, "block_table", block_table, 2, kind, q)
    if table.shape[0] != B:
        raise ValueError(f"tessel.{fn}: block_table has {table.shape[0]} rows for {B} sequences")
    max_pages = table.shape[1]
    limit = max_pages * page
    lengths = _key_lengths(fn, kind, q, cu_seqlens_k, seqused_k, B)
    for name, m in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 0:
            raise ValueError(f"tessel.{fn}: {name} must be a non-negative int, got {m!r}")
    if kind == "numpy":
        _check_lengths(fn, cu_q, lengths, table, total_q, max_seqlen_q, max_seqlen_k, limit,
                       num_pages, page)
    if H * max(total_q, 1) > _I32_MAX or num_pages * page > _I32_MAX:
        raise ValueError(f"tessel.{fn}: too many rows for 32-bit row indices")
    scale = softmax_scale(scale, D)
    (q, q_rs, q_hs), (k_cache, k_rs, k_hs), (v_cache, v_rs, v_hs) = (
        _strided(x) for x in (q, k_cache, v_cache))
    checked = (q, k_cache, v_cache, cu_q, table, lengths if seqused_k is not None else None)
    outputs = (lambda q: (_out(kind, q, (total_q, H, D)),                      # noqa: E731
                          _out(kind, q, (H, total_q), np.float32)))

    def planned(run):
        """Keeps `run` as the call signature's plan (what this call copied, layouts the
        kernels do not read in place, copied again on replay) and runs it."""
        if key is not None:
            _remember(key, run, [x is not y for x, y in zip(given[:4] + given[5:], checked)])
        return run(q, k_cache, v_cache, cu_q, lengths, table)
    if _packs_few_queries(kind, max_seqlen_q, H // Hkv):
        return planned(_few_queries_run(
            kind, int(max_seqlen_q), total_q, outputs, return_lse,
            dict(causal=causal, scale=scale, block_m=block_m, block_n=block_n,
                 window_size=window_size, softcap=softcap, alibi_slopes=alibi_slopes)))
    if alibi_slopes is not None:
        mods = _position_mods(fn, causal, window_size, softcap, alibi_slopes, q, (B, H))
    dtype = _dtype_name(q)
    G = H // Hkv
    # Decode steps (sequences of one query): attention_with_kvcache's split-KV program, the
    # query heads of a KV group packed as its rows and the keys split across programs — alone
    # (max_seqlen_q = 1) or, in a mixed batch, beside varlen_cache_kernel's launch for the
    # other sequences (_packs_decode_rows).
    splits_ok = G <= serving_decode.MAX_PACKED_ROWS and \
        serving_decode.fits_i32(B, 1, H, D, q_rs, serving_decode.MAX_SPLITS)
    decode = int(max_seqlen_q) == 1 and splits_ok
    mixed = not decode and splits_ok and _packs_decode_rows(kind, max_seqlen_q, total_q, B)
    dims = serving_checks.KVCACHE_FAST_HEAD_DIMS
    DB = serving_checks.kvcache_block_head_dim(kind, dtype, D, dims)
    fast = _fast_blocks(kind, dtype, DB or D, (k_rs, k_hs, v_rs, v_hs, q_rs, q_hs), dims)

    def blocks(rows, fast=fast):
        bm, bn = fast or _blocks(kind, D, dtype, rows, limit)
        return _block_arg(fn, "block_m", block_m, bm), _block_arg(fn, "block_n", block_n, bn)
    DB = DB if fast else 0
    launches = []
    if decode or mixed:
        BM, BN = blocks(G)
        shape = dict(B=B, Sq=1, H=H, Hkv=Hkv, D=D, page=page, max_pages=max_pages,
                     cache_rows=num_pages * page, scale=scale, causal=causal, block_m=BM,
                     block_n=BN, score_mod=mods.get("SCORE_MOD"),
                     mask_mod=mods.get("MASK_MOD"), block_dim=DB, total_q=total_q)
        launches.append(_decode_launch(q, q_rs, q_hs, (k_rs, k_hs, v_rs, v_hs), shape))
    if not decode:
        BM, BN = blocks(max_seqlen_q, serving_checks.cache_kernel_blocks(fast, DB or D, page))
        cx = dict(q_rs=q_rs, q_hs=q_hs, k_rs=k_rs, k_hs=k_hs, v_rs=v_rs, v_hs=v_hs, D=D,
                  BLOCK_M=BM, BLOCK_N=BN, PAGE=page, CAUSAL=bool(causal), **mods,
                  **({"DB": DB} if DB else {}), **({"SKIP_SINGLE": True} if mixed else {}))
        scalars = (B, total_q, int(max_seqlen_q), num_pages * page, H, Hkv, max_pages, scale)

        def launch(q, k_cache, v_cache, o, lse, cu_q, lengths, table):
            grid, tiles, tx = serving_checks.varlen_grid(kind, cu_q, B, total_q,
                                                         int(max_seqlen_q), BM, H)
            _launch(varlen_cache_kernel, grid,
                    (q, k_cache, v_cache, o, lse, cu_q, lengths, table, *scalars, *tiles),
                    dict(cx, **tx))
        launches.append(launch)

    def run(q, k_cache, v_cache, cu_q, lengths, table):
        o, lse = outputs(q)
        for launch in launches:
            launch(q, k_cache, v_cache, o, lse, cu_q, lengths, table)
        return (o, lse) if return_lse else o
    return planned(run)


def _packs_decode_rows(kind, max_seqlen_q, total_q, B):
    """Whether a batch of longer sequences (max_seqlen_q > 1) runs its decode steps (sequences
    of one query) through the split-KV program beside varlen_cache_kernel's launch for the rest
    (PACK_DECODE_ROWS): where some sequence may have one query, i.e. not every one of the B
    has max_seqlen_q (the host does not read cu_seqlens_q, which is on the device)."""
    on = PACK_DECODE_ROWS_CUDA if kind == "cuda" else PACK_DECODE_ROWS
    return on and int(max_seqlen_q) > 1 and total_q < B * int(max_seqlen_q)


def _packs_few_queries(kind, max_seqlen_q, G):
    """Whether a call of at most max_seqlen_q queries a sequence, a few, takes
    _few_queries_run (FEW_QUERIES_PACKED): the heads of a KV group times the queries fit the
    split-KV program's packed rows."""
    on = FEW_QUERIES_PACKED_CUDA if kind == "cuda" else FEW_QUERIES_PACKED
    S = int(max_seqlen_q)
    return on and 2 <= S <= MAX_FEW_QUERIES and G * S <= serving_decode.MAX_PACKED_ROWS


def _few_queries_run(kind, S, total_q, outputs, return_lse, options):
    """run(q, k_cache, v_cache, cu_q, lengths, table) for sequences of at most S queries:
    sequence b's nq_b queries gathered into slots S - nq_b .. S - 1 of a [B, S, H, D] q
    (right-aligned, so that attention_with_kvcache's bottom-right positions, nk - S + slot, are
    theirs: nk - nq_b + i), attention_with_kvcache over the same cache (its split-KV decode with
    GQA packing), and each packed row's o and lse gathered back from its (sequence, slot); rows
    past the last sequence keep `outputs(q)`'s. The other slots read some row of q and are
    never read. Gathers both ways: a boolean-mask scatter waits on the device for its count."""
    from .serving import attention_with_kvcache
    xp = np if kind == "numpy" else gpu.torch_module()

    def run(q, k_cache, v_cache, cu_q, lengths, table):
        B = cu_q.shape[0] - 1
        if not (B and total_q):
            return outputs(q) if return_lse else outputs(q)[0]
        if kind == "numpy":
            slot, r, ends = np.arange(S), np.arange(total_q), cu_q[1:].astype(np.int64)
            seq = np.searchsorted(ends, r, side="right")
        else:                   # made on the device: a host copy would wait for the stream
            slot, r = (xp.arange(n, device=q.device) for n in (S, total_q))
            ends = cu_q[1:].long().contiguous()
            seq = xp.searchsorted(ends, r, right=True)
        rows = (ends - S)[:, None] + slot[None, :]                # [B, S], right-aligned
        o_s, lse_s = attention_with_kvcache(q[rows.clip(0, total_q - 1)], k_cache, v_cache,
                                            lengths, block_table=table, return_lse=True,
                                            **options)
        inside = seq < B                                          # rows past the last: kept
        seq = seq.clip(0, B - 1)
        at = (S - (ends[seq] - r)).clip(0, S - 1)                 # each packed row's slot
        o, lse = outputs(q)
        o = xp.where(inside[:, None, None], o_s[seq, at], o)
        lse_h = lse_s.transpose(1, 0, 2) if kind == "numpy" else lse_s.transpose(0, 1)
        lse = xp.where(inside[None, :], lse_h[:, seq, at], lse)
        return (o, lse) if return_lse else o
    return run


def _decode_launch(q, q_rs, q_hs, kv_strides, shape):
    """launch(q, k_cache, v_cache, o, lse, cu_q, lengths, table) of serving_decode's split-KV
    program and combine (VARLEN_Q: the sequences of exactly one query), the splits by its
    heuristic as attention_with_kvcache's decode takes them; `shape`: launch's keywords."""
    B, Hkv, G = shape["B"], shape["Hkv"], shape["H"] // shape["Hkv"]
    limit = shape["max_pages"] * shape["page"]
    n = 1 if limit < serving_decode.MIN_KEYS_TO_SPLIT else \
        serving_decode.num_splits_heuristic(B * Hkv * -(-G // shape["block_m"]),
                                            -(-limit // shape["block_n"]),
                                            serving_decode.num_sms(q))
    launched = []

    def launch(q, k_cache, v_cache, o, lse, cu_q, lengths, table):
        if launched:
            launched[0](q, k_cache, v_cache, o, lse, lengths, table, None, cu_q)
        else:                          # the first call decides the launches and runs them
            launched.append(serving_decode.launch(
                q, q_rs, q_hs, k_cache, v_cache, kv_strides, o, lse, lengths, table,
                n_splits=n, cu_q=cu_q, **shape))
    return launch


#: attention_varlen_paged's plans for CUDA calls, by call signature (serving._call_signature).
_PLANS = {}
_MAX_PLANS = 256


def _plain_int(n):
    return isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0


def _remember(key, run, copied):
    """Keeps the replay of a checked CUDA call: q, the cache, cu_seqlens_q, block_table and
    seqused_k copied where the first call copied them, the key counts seqused_k or else
    cu_seqlens_k's differences, `run`'s launch."""
    def replay(q, k_cache, v_cache, cu_q, cu_k, table, seqused_k):
        q, k_cache, v_cache, cu_q, table, used = (
            x.contiguous() if c else x for x, c in zip((q, k_cache, v_cache, cu_q, table,
                                                        seqused_k), copied))
        lengths = used if used is not None else (cu_k[1:] - cu_k[:-1]).contiguous()
        return run(q, k_cache, v_cache, cu_q, lengths, table)
    if len(_PLANS) >= _MAX_PLANS:
        _PLANS.clear()
    _PLANS[key] = replay


def _key_lengths(fn, kind, q, cu_seqlens_k, seqused_k, B):
    """Each sequence's key count, int32 [B]: seqused_k, or cu_seqlens_k's differences."""
    if seqused_k is not None:
        used = _check_index(fn, "seqused_k", seqused_k, 1, kind, q)
        if used.shape[0] != B:
            raise ValueError(f"tessel.{fn}: seqused_k has {used.shape[0]} entries for {B} "
                             "sequences")
        return used
    if cu_seqlens_k is None:
        raise ValueError(f"tessel.{fn}: with block_table, the keys of each sequence are "
                         "cu_seqlens_k's differences or seqused_k: give one")
    cu_k = _check_index(fn, "cu_seqlens_k", cu_seqlens_k, 1, kind, q)
    if cu_k.shape[0] != B + 1:
        raise ValueError(f"tessel.{fn}: cu_seqlens_q has {B + 1} entries and cu_seqlens_k "
                         f"{cu_k.shape[0]}: both must be B + 1 for B sequences")
    if kind == "numpy":
        return np.ascontiguousarray(np.diff(cu_k).astype(np.int32))
    return (cu_k[1:] - cu_k[:-1]).contiguous()


def _check_lengths(fn, cu_q, lengths, table, total_q, max_q, max_k, limit, num_pages, page):
    """numpy calls: the query spans, key counts and the pages they use, named in errors."""
    nq = np.diff(cu_q)
    if cu_q[0] != 0 or (nq < 0).any() or cu_q[-1] > total_q:
        raise ValueError(f"tessel.{fn}: cu_seqlens_q must start at 0, never decrease and end at "
                         f"most at {total_q} (the rows of q), got {cu_q.tolist()}")
    if nq.size and nq.max() > max_q:
        raise ValueError(f"tessel.{fn}: sequence {int(nq.argmax())} has {int(nq.max())} "
                         f"queries, more than max_seqlen_q = {max_q}")
    bad = (lengths < 0) | (lengths > limit)
    if bad.any():
        b = int(np.argmax(bad))
        raise ValueError(f"tessel.{fn}: sequence {b} has {int(lengths[b])} keys; its pages hold "
                         f"0 to {limit}")
    if lengths.size and lengths.max() > max_k:
        raise ValueError(f"tessel.{fn}: sequence {int(lengths.argmax())} has "
                         f"{int(lengths.max())} keys, more than max_seqlen_k = {max_k}")
    for b, n in enumerate(lengths):
        for p in range(-(-int(n) // page)):
            if not 0 <= table[b, p] < num_pages:
                raise ValueError(f"tessel.{fn}: block_table[{b}, {p}] = {int(table[b, p])} is "
                                 f"not a page of the cache (0 to {num_pages - 1})")
