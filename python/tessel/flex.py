"""tessel.flex_attention: FlexAttention's call (torch.nn.attention.flex_attention) on tessel's
kernels, with FlexAttention's own BlockMask (create_block_mask) or tessel's.

A FlexAttention BlockMask is taken over as a tessel BlockMask: the same compact lists, made
canonical once (ascending, 0 past the counts, a padded last key block never full, since
tessel's full blocks skip the key-length check), or tessel's own classification of its
mask_mod where that visits no block the lists leave out (it also knows whether the mask is
causal's), kept per list tensors and versions (`block_mask_of`). Under torch.compile the
lists travel into tessel's op as they are (torch_ops.block_inputs) and are taken over there by
the same function. docs/dsl.md, "Code written against FlexAttention".
"""
import sys

from . import gpu

# (tensors' weak references, their versions, BlockMask) by the lists' ids; oldest first.
_TAKEN = {}
_TAKEN_MAX = 16


def is_flex_block_mask(x):
    """Whether x is torch.nn.attention.flex_attention.BlockMask."""
    t = type(x)
    return t.__name__ == "BlockMask" and t.__module__.startswith("torch.nn.attention")


def flex_lists(fbm):
    """(lists, meta) of a FlexAttention BlockMask as tessel's ops take them (layout 1)."""
    Nq, Nk = fbm.seq_lengths
    BM, BN = fbm.BLOCK_SIZE
    lists = [fbm.kv_num_blocks, fbm.kv_indices]
    if fbm.full_kv_num_blocks is not None:
        lists += [fbm.full_kv_num_blocks, fbm.full_kv_indices]
    B, H = fbm.kv_num_blocks.shape[:2]
    return lists, [B if B > 1 else -1, H if H > 1 else -1, Nq, Nk, BM, BN, 1]


def _everything(b, h, q_idx, kv_idx):
    return q_idx >= 0


def mask_mod_of(fbm):
    """The mask_mod to call with a FlexAttention BlockMask: its own, or for FlexAttention's
    noop_mask (block sparsity alone) one that keeps every pair."""
    fn = fbm.mask_mod
    if getattr(fn, "__name__", None) == "noop_mask" and \
            getattr(fn, "__module__", "").startswith("torch.nn.attention"):
        return _everything
    return fn


def taken_over(fbm, mask_mod, traced):
    """(mask_mod, block_mask) of a tessel.attention call given FlexAttention's BlockMask: its
    own mask_mod (or the one given, which must be it), and tessel's BlockMask of it, or the
    FlexAttention one itself where the call is traced (the op takes its lists as they are)."""
    own = mask_mod_of(fbm)
    if mask_mod is not None and mask_mod is not own:
        from .blocksparse import _same_mod
        if traced or not _same_mod(own, mask_mod):
            raise ValueError("tessel.attention: the FlexAttention block_mask was made from "
                             f"another mask_mod ({getattr(own, '__name__', own)!r}) than the "
                             f"one passed ({getattr(mask_mod, '__name__', mask_mod)!r})")
    mask_mod = own
    return mask_mod, fbm if traced else block_mask_of(*flex_lists(fbm), mask_mod)


def block_mask_of(lists, meta, mask_mod):
    """The tessel BlockMask of an op's block-mask inputs (torch_ops.block_inputs) that are no
    live mask's lists: kept per list tensors and versions (the same tensors unchanged are the
    same mask, with what it computed once), taken over from FlexAttention's layout where meta
    says so (meta[6] == 1)."""
    from .blocksparse import _reference, _same_tensors
    key = tuple(id(x) for x in lists)
    versions = tuple(x._version for x in lists)
    hit = _TAKEN.pop(key, None)
    if hit is None or hit[1] != versions or not _same_tensors(hit[0], lists):
        hit = (tuple(_reference(x) for x in lists), versions, _made(lists, meta, mask_mod))
        while len(_TAKEN) >= _TAKEN_MAX:
            _TAKEN.pop(next(iter(_TAKEN)))
    _TAKEN[key] = hit
    return hit[2]


def _made(lists, meta, mask_mod):
    from .blocksparse import BlockMask, is_mask_block
    B, H, Nq, Nk, BM, BN, layout = meta
    for name, x in (("BLOCK_SIZE[0]", BM), ("BLOCK_SIZE[1]", BN)):
        if not is_mask_block(x):
            raise ValueError(f"tessel.flex_attention: the block mask's {name} is {x}; tessel "
                             "takes powers of two >= 16")
    shape = (None if B < 0 else B, None if H < 0 else H, Nq, Nk)
    if layout == 1:
        visited = _blocks(lists[0], lists[1])
        if len(lists) > 2:
            visited |= _blocks(lists[2], lists[3])
        own = _own_within(visited, shape, BM, BN, mask_mod, lists[0])
        if own is not None:
            return own
        lists = _canonical(lists, Nk, BN)
    if not lists[0].is_cuda:
        lists = [x.numpy() for x in lists]      # (the interpreter's numpy)
    return BlockMask(*lists[:4], shape, BM, BN, mask_mod,
                     off_causal=lists[4] if len(lists) > 4 else None)


def _blocks(num, idx):
    """bool [..., NQB, NKB]: the key blocks a (counts, indices) pair of lists names, torch
    tensors (FlexAttention's or tessel's layout: the tail past the count is not read)."""
    torch = gpu.torch_module()
    num, idx = torch.as_tensor(num), torch.as_tensor(idx)
    valid = torch.arange(idx.shape[-1], device=idx.device) < num[..., None]
    marks = torch.zeros(idx.shape, dtype=torch.int32, device=idx.device)
    return marks.scatter_add_(-1, torch.where(valid, idx, 0).long(), valid.int()) > 0


def _own_within(visited, shape, BM, BN, mask_mod, like):
    """tessel's own classification of mask_mod (tessel.block_mask) where it visits no block
    that FlexAttention's lists leave out (`visited`), else None. Blocks FlexAttention visits
    and tessel finds empty hold no allowed pair, so skipping them changes nothing; tessel's own
    knows where the mask is causal's (BlockMask.is_causal: the dense causal kernel then runs)
    and cuts the last blocks by the lengths. A BlockMask sparser than its mask_mod (made from
    lists) keeps its own blocks."""
    from .blocksparse import _classified, _placement
    if mask_mod is _everything:
        return None
    own = _classified(mask_mod, *shape, BM, BN, _placement(None, like))
    mine = _blocks(own.kv_num_blocks, own.kv_indices) | \
        _blocks(own.full_kv_num_blocks, own.full_kv_indices)
    return None if bool((mine.to(visited.device) & ~visited).any()) else own


def _canonical(lists, Nk, BN):
    """FlexAttention's lists as tessel's: ascending, 0 past the counts, and a last key block
    that the key length cuts never among the full ones (tessel's full blocks do not check it)."""
    from .blocksparse import block_lists
    full = _blocks(lists[2], lists[3]) if len(lists) > 2 else \
        gpu.torch_module().zeros(lists[1].shape, dtype=bool, device=lists[1].device)
    partial = _blocks(lists[0], lists[1]) & ~full
    if Nk % BN:
        partial[..., -1] |= full[..., -1]
        full[..., -1] = False
    return [*block_lists(partial), *block_lists(full)]


def create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device=None, BLOCK_SIZE=128, _compile=False,
                      **_options):
    """FlexAttention's ``create_block_mask`` signature, tessel's block mask
    (:func:`tessel.block_mask`: 3–12× faster than FlexAttention's on an H100, B4 H16 N8192).

    Args:
        mask_mod: ``(b, h, q_idx, kv_idx) -> bool``, as for FlexAttention.
        B: the batch size, or None (the mask does not depend on ``b``).
        H: the number of query heads, or None.
        Q_LEN: the number of queries.
        KV_LEN: the number of keys.
        device: ``"cuda"`` (or a CUDA device) for CUDA tensors; None or ``"cpu"`` for the
            interpreter's (CPU tensors of ``query`` run there).
        BLOCK_SIZE: an int or ``(BLOCK_M, BLOCK_N)``, powers of two >= 16; FlexAttention's
            128 by default.
        _compile: FlexAttention's (compiles its builder); ignored, as its other tuning
            options are.

    Returns:
        tessel.BlockMask, for :func:`flex_attention` or :func:`tessel.attention`.
    """
    from .blocksparse import block_mask
    BM, BN = (BLOCK_SIZE, BLOCK_SIZE) if isinstance(BLOCK_SIZE, int) else BLOCK_SIZE
    return block_mask(mask_mod, B, H, Q_LEN, KV_LEN, BLOCK_M=BM, BLOCK_N=BN, device=device)


def flex_attention(query, key, value, score_mod=None, block_mask=None, scale=None,
                   enable_gqa=False, return_lse=False, kernel_options=None, *, return_aux=None):
    """FlexAttention's call on tessel's kernels: ``torch.nn.attention.flex_attention``'s
    signature and results.

    Args:
        query, key, value: ``[B, H, Nq, E]``, ``[B, Hkv, Nk, E]``, ``[B, Hkv, Nk, Ev]`` torch
            tensors (CUDA: the GPU; CPU: the interpreter), as for :func:`tessel.attention`.
        score_mod: ``(score, b, h, q_idx, kv_idx) -> score``, written as for FlexAttention;
            torch.where, torch.tanh, torch.exp, torch.exp2, torch.log, torch.log2,
            torch.sqrt, torch.abs, torch.maximum and torch.minimum compile as their tl
            namesakes.
        block_mask: a BlockMask of FlexAttention (``create_block_mask``) or of tessel
            (:func:`tessel.block_mask`), or None; its mask_mod is applied in its partial
            blocks. FlexAttention's block sizes must be powers of two >= 16.
        scale: the softmax scale; default ``1 / sqrt(E)``.
        enable_gqa: query heads share key/value heads (H a multiple of Hkv).
        return_lse: also return the log-sum-exp ``[B, H, Nq]`` (float32, natural log).
        kernel_options: FlexAttention's Triton tuning (block sizes, warps, stages); tessel
            picks its own kernels and ignores them.
        return_aux: FlexAttention's AuxRequest: ``lse=True`` returns ``(out, AuxOutput)``
            with the LSE; ``max_scores`` is not computed (NotImplementedError).

    Returns:
        out, or ``(out, lse)``, or ``(out, AuxOutput)``, as flex_attention.
    """
    from .attention import attention
    if return_aux is not None and getattr(return_aux, "max_scores", False):
        raise NotImplementedError("tessel.flex_attention: return_aux max_scores is not "
                                  "computed; ask for lse only")
    if return_aux is not None and return_lse:
        raise ValueError("tessel.flex_attention: pass return_lse or return_aux, not both")
    mask_mod = None if block_mask is None or is_flex_block_mask(block_mask) else \
        getattr(block_mask, "mask_mod", None)      # (FlexAttention's: attention takes it over)
    want_lse = return_lse or bool(return_aux is not None and getattr(return_aux, "lse", False))
    out = attention(query, key, value, score_mod=score_mod, mask_mod=mask_mod,
                    block_mask=block_mask, scale=scale, enable_gqa=enable_gqa,
                    return_lse=want_lse)
    if return_aux is None:
        return out
    o, lse = out if want_lse else (out, None)
    aux = getattr(sys.modules.get("torch.nn.attention.flex_attention"), "AuxOutput", None)
    return (o, aux(lse=lse, max_scores=None)) if aux is not None else (o, lse)
