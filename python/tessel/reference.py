"""float64 numpy attention with PyTorch SDPA semantics: the reference of tests and examples.

`score(s, b, h, q_idx, kv_idx)` and `allowed(b, h, q_idx, kv_idx)` are numpy versions of a
score_mod and a mask_mod (q_idx is a column, kv_idx a row of indices). Fully masked rows give 0
and lse -inf.
"""
import numpy as np


def _softmax(s, b, h, qi, ki, causal, allowed):
    """The visible keys `ok` of scores `s` (causal, `allowed`), the probabilities p (0 in rows
    that see no key), the row max m (0 there) and the row sum l of exp(s - m)."""
    ok = np.ones(s.shape, dtype=bool)
    if causal:
        ok &= qi >= ki
    if allowed is not None:
        ok &= np.broadcast_to(allowed(b, h, qi, ki), s.shape)
    s = np.where(ok, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    l = e.sum(axis=-1, keepdims=True)
    return ok, e / np.where(l == 0, 1.0, l), m, l


def reference_attention(q, k, v, scale=None, causal=False, score=None, allowed=None,
                        enable_gqa=False):
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    B, H, Nq, D = q.shape
    Hkv, Nk = k.shape[1], k.shape[2]
    assert H == Hkv or enable_gqa
    k = np.repeat(k, H // Hkv, axis=1)
    v = np.repeat(v, H // Hkv, axis=1)
    scale = 1.0 / np.sqrt(D) if scale is None else scale
    qi = np.arange(Nq)[:, None]
    ki = np.arange(Nk)[None, :]
    o = np.zeros((B, H, Nq, v.shape[3]))       # v's head dim may be its own (SDPA's Ev)
    lse = np.zeros((B, H, Nq))
    for b in range(B):
        for h in range(H):
            s = q[b, h] @ k[b, h].T * scale
            if score is not None:
                s = score(s, b, h, qi, ki)
            _, p, m, l = _softmax(s, b, h, qi, ki, causal, allowed)
            o[b, h] = p @ v[b, h]
            with np.errstate(divide="ignore"):
                lse[b, h] = (m + np.log(l))[:, 0]
    return o, lse


def max_rel_error(out, ref):
    """max |out - ref| / max(1, max |ref|)."""
    out = np.asarray(out, dtype=np.float64)
    return float(np.max(np.abs(out - ref)) / max(1.0, float(np.max(np.abs(ref)))))


def reference_attention_backward(q, k, v, do, scale=None, causal=False, score=None,
                                 score_grad=None, allowed=None, enable_gqa=False, dlse=None):
    """float64 gradients (dq, dk, dv) of reference_attention for the output gradient do (and
    dlse, the gradient of the lse), written out by hand, independently of tessel's programs:
    score_grad(s, b, h, q_idx, kv_idx) is the derivative of `score` with respect to s. dk and
    dv are summed over the query heads of each key/value head (GQA)."""
    q, k, v, do = (np.asarray(x, dtype=np.float64) for x in (q, k, v, do))
    B, H, Nq, D = q.shape
    Hkv, Nk = k.shape[1], k.shape[2]
    assert H == Hkv or enable_gqa
    group = H // Hkv
    scale = 1.0 / np.sqrt(D) if scale is None else scale
    qi = np.arange(Nq)[:, None]
    ki = np.arange(Nk)[None, :]
    dq, dk, dv = np.zeros(q.shape), np.zeros(k.shape), np.zeros(v.shape)
    for b in range(B):
        for h in range(H):
            kh = h // group
            s_raw = q[b, h] @ k[b, kh].T * scale
            s = s_raw if score is None else score(s_raw, b, h, qi, ki)
            ok, p, _, _ = _softmax(s, b, h, qi, ki, causal, allowed)
            o = p @ v[b, kh]
            delta = (do[b, h] * o).sum(axis=-1, keepdims=True)
            if dlse is not None:
                delta = delta - np.asarray(dlse, dtype=np.float64)[b, h][:, None]
            ds = p * (do[b, h] @ v[b, kh].T - delta)
            if score_grad is not None:
                ds = ds * np.where(ok, np.broadcast_to(score_grad(s_raw, b, h, qi, ki), ds.shape),
                                   0.0)
            dq[b, h] = ds @ k[b, kh] * scale
            dk[b, kh] += ds.T @ q[b, h] * scale
            dv[b, kh] += p.T @ do[b, h]
    return dq, dk, dv


def position_mods(offset, causal=False, window=None, softcap=None, alibi=None):
    """(score, score_grad, allowed) for reference_attention / reference_attention_backward
    from FlashAttention's arguments, the query at row i taken at position i + offset (0: top-left,
    as tessel.attention; nk - nq: bottom-right, as the serving entry points): causal and the
    window ((left, right), -1: unbounded) on those positions, the scores capped by softcap
    (None or 0: none), then biased by -alibi[h]·|i + offset - j| (alibi: [H] slopes or None);
    score_grad is the cap's derivative (the bias adds)."""
    left, right = window or (-1, -1)

    def allowed(b, h, qi, ki):
        pos = qi + offset
        ok = (pos >= ki) if causal else np.ones(np.broadcast(qi, ki).shape, bool)
        if left >= 0:
            ok = ok & (ki >= pos - left)
        if right >= 0:
            ok = ok & (ki <= pos + right)
        return ok

    def score(s, b, h, qi, ki):
        if softcap:
            s = softcap * np.tanh(s / softcap)
        if alibi is not None:
            s = s - float(alibi[h]) * np.abs(qi + offset - ki)
        return s

    def score_grad(s, b, h, qi, ki):
        return 1 - np.tanh(s / softcap) ** 2 if softcap else np.ones_like(s)
    return score, score_grad, allowed


def _sequence(q, k, v, scale, causal, window=None, softcap=None, alibi=None):
    """One sequence in BSHD-like layout: q [nq, H, D], k and v [nk, Hkv, D], FlashAttention's
    arguments bottom-right aligned (position_mods); returns o [nq, H, Dv] (v's head dim) and
    lse [H, nq]."""
    nq, nk = q.shape[0], k.shape[0]
    if nk == 0:                               # no keys: every row sees none
        return np.zeros(q.shape[:2] + v.shape[2:]), np.full((q.shape[1], nq), -np.inf)
    t = lambda x: np.ascontiguousarray(np.asarray(x, dtype=np.float64).transpose(1, 0, 2))[None]
    score, _, allowed = position_mods(nk - nq, causal, window, softcap, alibi)
    o, lse = reference_attention(t(q), t(k), t(v), scale=scale,
                                 score=score if softcap or alibi is not None else None,
                                 allowed=allowed if causal or window else None,
                                 enable_gqa=True)
    return o[0].transpose(1, 0, 2), lse[0]


def reference_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, scale=None, causal=False,
                     window=None, softcap=None, alibi=None, seqused_k=None):
    """float64 tessel.attention_varlen, one sequence at a time: o [total_q, H, Dv] (v's head
    dim) and lse [H, total_q]; alibi: slopes [H] or [B, H]; seqused_k: each sequence's keys
    are the first that many rows of its span."""
    H = q.shape[1]
    o = np.zeros(q.shape[:2] + v.shape[2:])
    lse = np.full((H, q.shape[0]), -np.inf)
    for b in range(len(cu_seqlens_q) - 1):
        qs = slice(int(cu_seqlens_q[b]), int(cu_seqlens_q[b + 1]))
        k0 = int(cu_seqlens_k[b])
        ks = slice(k0, int(cu_seqlens_k[b + 1]) if seqused_k is None else
                   k0 + int(seqused_k[b]))
        o[qs], lse[:, qs] = _sequence(q[qs], k[ks], v[ks], scale, causal, window, softcap,
                                      _slopes_of(alibi, b))
    return o, lse


def _slopes_of(alibi, b):
    """Sequence b's ALiBi slopes [H] from [H] or [B, H] (None: no ALiBi)."""
    if alibi is None:
        return None
    alibi = np.asarray(alibi, dtype=np.float64)
    return alibi[b] if alibi.ndim == 2 else alibi


def reference_kvcache(q, k_cache, v_cache, cache_seqlens, block_table=None, scale=None,
                      causal=False, window=None, softcap=None, alibi=None, batch_idx=None,
                      leftpad=None):
    """float64 tessel.attention_with_kvcache: each sequence's keys gathered from the
    contiguous or paged cache (sequence batch_idx[b] of a contiguous one where given), those
    before leftpad[b] dropped; o [B, Sq, H, D] and lse [B, H, Sq]."""
    B, Sq, H, _ = q.shape
    o = np.zeros(q.shape)
    lse = np.zeros((B, H, Sq))
    for b in range(B):
        n = int(cache_seqlens[b])
        if block_table is None:
            c = b if batch_idx is None else int(batch_idx[b])
            k, v = k_cache[c, :n], v_cache[c, :n]
        else:
            page = k_cache.shape[1]
            rows = [(int(block_table[b, j // page]), j % page) for j in range(n)]
            k = np.stack([k_cache[p, r] for p, r in rows]) if rows else k_cache[0, :0]
            v = np.stack([v_cache[p, r] for p, r in rows]) if rows else v_cache[0, :0]
        # Every rule depends on query minus key position, which dropping the first keys keeps.
        lp = 0 if leftpad is None else min(int(leftpad[b]), n)
        k, v = k[lp:], v[lp:]
        o[b], lse[b] = _sequence(q[b], k, v, scale, causal, window, softcap,
                                 _slopes_of(alibi, b))
    return o, lse


def reference_rotary(x, cos, sin, positions, interleaved):
    """float64 FlashAttention rotary embedding of x [S, heads, D] at positions [S] (rows of
    cos, sin [seqlen_ro, R/2]): pairs (2j, 2j + 1) when interleaved (GPT-J), else (j, j + R/2)
    (GPT-NeoX); the head dims past R as they are."""
    x = np.asarray(x, dtype=np.float64)
    out = x.copy()
    R = 2 * cos.shape[1]
    c = np.asarray(cos, dtype=np.float64)[positions][:, None, :]
    s = np.asarray(sin, dtype=np.float64)[positions][:, None, :]
    a, b = (slice(0, R, 2), slice(1, R, 2)) if interleaved else (slice(0, R // 2),
                                                                   slice(R // 2, R))
    out[..., a], out[..., b] = x[..., a] * c - x[..., b] * s, x[..., b] * c + x[..., a] * s
    return out
