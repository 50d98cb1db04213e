"""attention_varlen's gradients: packed sequences trained as FlashAttention's varlen API is.

The forward is attention_varlen's own kernel. Its backward is the dense backward of one long
sequence — q as [1, H, total_q, D], k and v as [1, Hkv, total_k, D], views of the packed tensors —
under a mask that keeps each query to the keys of its own sequence: the rows' sequence ids and
positions (bottom-right aligned, as causal, the window and ALiBi are in attention_varlen) are
captured int32 tensors that the mask reads, and a block mask made from the same tables lets the
programs visit only the blocks inside the sequences (attention_backward's block_mask). The same scores,
mask and LSE as the forward's, so the same gradients as a backward per sequence. Rows past the
last sequence (cu_seqlens[-1] < total) get zero gradients and are never read. docs/dev/serving.md.
"""
from . import cpu_tensors
from . import gpu

_function = None


def attention_varlen_with_grad(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                               return_lse, options):
    """attention_varlen on torch tensors (CPU or CUDA) that require grad: o (and lse) with a
    grad_fn. options: attention_varlen's keyword arguments but return_lse."""
    o, lse = _autograd_function().apply(q, k, v, cu_seqlens_q, cu_seqlens_k,
                                        (max_seqlen_q, max_seqlen_k, options))
    return (o, lse) if return_lse else o


def _autograd_function():
    global _function
    if _function is not None:
        return _function
    torch = gpu.torch_module()

    class TesselVarlen(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, cu_q, cu_k, config):
            from .serving import attention_varlen
            max_q, max_k, options = config
            o, lse = attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k, return_lse=True,
                                      **options)
            ctx.save_for_backward(q, k, v, o, lse, cu_q, cu_k)
            ctx.options = options
            ctx.set_materialize_grads(False)
            return o, lse

        @staticmethod
        def backward(ctx, do, dlse):
            q, k, v, o, lse, cu_q, cu_k = ctx.saved_tensors
            dq, dk, dv = packed_backward(q, k, v, o, lse, do, dlse, cu_q, cu_k, **ctx.options)
            return dq, dk, dv, None, None, None

    _function = TesselVarlen
    return _function


def packed_backward(q, k, v, o, lse, do, dlse, cu_q, cu_k, causal=False, scale=None,
                    window_size=None, softcap=None, alibi_slopes=None, block_m=None,
                    block_n=None):
    """(dq, dk, dv) of attention_varlen's o and lse (torch tensors, CPU or CUDA), packed like
    q, k and v. block_m and block_n are the forward's blocks, not the backward programs'
    (theirs are their own defaults)."""
    torch = gpu.torch_module()
    from .backward import attention_backward
    dq, dk, dv = (torch.zeros_like(x) for x in (q, k, v))
    nq, nk = int(cu_q[-1]), int(cu_k[-1])          # the rows inside sequences
    if nq == 0 or nk == 0:
        return dq, dk, dv
    if do is None:                                 # only the LSE has a gradient
        do = torch.zeros_like(o)

    def rows(x, n):                                # [n, heads, D] -> [1, heads, n, D], a view
        return x[:n].transpose(0, 1).unsqueeze(0)
    tables = _row_tables(cu_q, cu_k, nq, nk)
    score_mod, mask_mod = packed_mods(tables, causal, window_size, softcap, alibi_slopes)
    qd = rows(q.detach(), nq)
    bm = packed_block_mask(mask_mod, tables, nq, nk, causal, window_size,
                           64 if cpu_tensors.is_cpu_tensor(q) else 128)
    grads = attention_backward(
        qd, rows(k.detach(), nk), rows(v.detach(), nk), rows(o, nq), lse[:, :nq].unsqueeze(0),
        rows(do, nq), scale=scale, score_mod=score_mod, mask_mod=mask_mod,
        enable_gqa=q.shape[1] != k.shape[1],
        dlse=None if dlse is None else dlse[:, :nq].unsqueeze(0), block_mask=bm)
    for full, g, n in zip((dq, dk, dv), grads, (nq, nk, nk)):
        full[:n] = g[0].transpose(0, 1)
    return dq, dk, dv


def packed_mods(tables, causal, window_size, softcap, alibi_slopes):
    """(score_mod, mask_mod) of the packed sequences whose rows' sequence ids and positions
    are `tables` (_row_tables): a query sees the keys of its own sequence, with causal, the
    window (FlashAttention's (left, right)), the soft cap and ALiBi at the sequence's
    bottom-right aligned positions, as attention_varlen's kernel has them."""
    from .attention import _as_jit
    from .flash_mods import _mask, _score, _softcap, _window
    window, cap = _window(window_size), _softcap(softcap)
    seq_q, pos_q, seq_k, pos_k = tables
    # flash_mods' cap, ALiBi and window at the rows' positions in their sequences; ALiBi
    # per batch reads the query row's sequence as its batch.
    flash_score = None if cap is None and alibi_slopes is None else _as_jit(
        _score(cap, alibi_slopes, alibi_slopes is not None and len(alibi_slopes.shape) == 2,
               False, None), "score_mod")
    window_mask = None if window is None else _as_jit(_mask(window, None), "mask_mod")

    def packed_mask(b, h, q_idx, kv_idx):
        m = seq_q[q_idx] == seq_k[kv_idx]
        i, j = pos_q[q_idx], pos_k[kv_idx]
        if causal:
            m = m & (i >= j)
        if window_mask is not None:
            m = m & window_mask(b, h, i, j)
        return m

    def packed_score(score, b, h, q_idx, kv_idx):
        return flash_score(score, seq_q[q_idx], h, pos_q[q_idx], pos_k[kv_idx])
    return (None if flash_score is None else packed_score), packed_mask


def packed_block_mask(mask_mod, tables, nq, nk, causal, window_size, block):
    """The BlockMask of packed_mods' mask_mod, made from the rows' sequence ids and positions
    by interval arithmetic over each block's rows and keys (O(blocks), where tessel.block_mask
    evaluates the mask at every pair). A block is empty where its rows and keys share no
    sequence (or, one sequence each side, causal or the window hides every pair), full where
    rows and keys lie in one sequence, every pair is allowed and no key is padding (the rule of
    block_state_kernel), partial otherwise: never full or empty where the mask says otherwise (a
    block the window hides only in combination with causal may be called partial: the mask's
    arithmetic for nothing)."""
    torch = gpu.torch_module()
    from .blocksparse import BlockMask, block_lists
    from .flash_mods import _window
    left, right = _window(window_size) or (-1, -1)
    seq_q, pos_q, seq_k, pos_k = (x.to(torch.int64) for x in tables)

    def spans(seq, pos, n):                        # min and max a block, padding left out
        nb = -(-n // block)
        pad = nb * block - n
        seq, pos = (torch.cat([x, x[-1:].expand(pad)]).view(nb, block) for x in (seq, pos))
        return seq.amin(1), seq.amax(1), pos.amin(1), pos.amax(1)
    qs0, qs1, qp0, qp1 = (x[:, None] for x in spans(seq_q, pos_q, nq))
    ks0, ks1, kp0, kp1 = (x[None, :] for x in spans(seq_k, pos_k, nk))
    one = (qs0 == qs1) & (ks0 == ks1) & (qs0 == ks0)
    empty = (qs1 < ks0) | (ks1 < qs0)
    whole = (torch.arange(ks0.shape[1], device=ks0.device) + 1) * block <= nk
    full = one & whole[None, :]
    if causal:
        empty |= one & (qp1 < kp0)
        full &= qp0 >= kp1
    if left >= 0:
        empty |= one & (kp1 < qp0 - left)
        full &= kp0 >= qp1 - left
    if right >= 0:
        empty |= one & (kp0 > qp1 + right)
        full &= kp1 <= qp0 + right
    part = ~empty & ~full
    lists = [tuple(x[None, None] for x in block_lists(m)) for m in (part, full)]
    if cpu_tensors.is_cpu_tensor(seq_q):
        lists = [tuple(x.numpy() for x in lst) for lst in lists]
    return BlockMask(*lists[0], *lists[1], (None, None, nq, nk), block, block, mask_mod)


def _row_tables(cu_q, cu_k, nq, nk):
    """int32 sequence ids and positions of the packed rows, torch tensors where the cumulative
    lengths are: query rows bottom-right aligned (position + the sequence's keys − its queries),
    key rows from 0."""
    torch = gpu.torch_module()
    out = []
    for cu, n in ((cu_q, nq), (cu_k, nk)):
        cu = cu.to(torch.int64)
        r = torch.arange(n, device=cu.device)
        seq = torch.searchsorted(cu[1:].contiguous(), r, right=True)
        out.append((seq, r - cu[seq]))
    (seq_q, pos_q), (seq_k, pos_k) = out
    lengths = torch.diff(cu_k.to(torch.int64)) - torch.diff(cu_q.to(torch.int64))
    pos_q = pos_q + lengths[seq_q]
    return [x.to(torch.int32) for x in (seq_q, pos_q, seq_k, pos_k)]

