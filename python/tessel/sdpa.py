"""tessel.scaled_dot_product_attention: torch.nn.functional.scaled_dot_product_attention's
signature and semantics on tessel's kernels, a drop-in for code written against SDPA.

`attn_mask` is what SDPA takes: a boolean tensor (True: the key takes part) or a float tensor
added to the scaled scores, broadcastable to [..., L, S]. It becomes a mask_mod or a score_mod
that reads the tensor (docs/dsl.md, "Captured tensors"): broadcast dimensions are expanded with
stride 0 (no copy), and on CUDA a boolean mask gets its block mask built, so blocks it hides
are skipped. Leading dimensions beyond [B, H] are folded into the batch; 3-D inputs are one
head.
"""
from . import gpu
from . import torch_ops


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """torch.nn.functional.scaled_dot_product_attention on tessel.

    Args:
        query: ``[..., L, E]`` (torch tensors: CPU on the interpreter, CUDA on the GPU).
        key: ``[..., S, E]``; with ``enable_gqa`` its head dimension (the one before S) may
            divide query's.
        value: ``[..., S, Ev]``.
        attn_mask: a boolean or float tensor broadcastable to ``[..., L, S]``; True / the
            value added where a query attends to a key. Not with ``is_causal`` (as SDPA).
        dropout_p: must be 0 (tessel has no attention dropout; ``nn.MultiheadAttention`` in
            eval mode and most LLM training pass 0).
        is_causal: the causal mask, top-left aligned (SDPA's ``is_causal``).
        scale: the scores' factor, ``1/sqrt(E)`` by default.
        enable_gqa: grouped-query attention, as SDPA's.

    Returns:
        ``[..., L, Ev]`` in query's dtype. Unlike SDPA's math backend, a query row that every
        key is masked from gives 0, not NaN.

    Raises:
        NotImplementedError: ``dropout_p`` other than 0, or an ``attn_mask`` that requires
            grad.
        ValueError: ``attn_mask`` with ``is_causal``, shapes that do not broadcast.
        TypeError: inputs that are not torch tensors, a mask of another dtype.
    """
    from .attention import attention
    torch = gpu.torch_module()
    for name, x in (("query", query), ("key", key), ("value", value)):
        if torch is None or not isinstance(x, torch.Tensor):
            raise TypeError(f"tessel.scaled_dot_product_attention: {name} must be a torch "
                            f"tensor, got {type(x).__name__}")
        if x.dim() < 3:
            raise ValueError(f"tessel.scaled_dot_product_attention: {name} must have at least "
                             f"3 dimensions ([..., N, E]), got {tuple(x.shape)}")
    if dropout_p:
        raise NotImplementedError(
            f"tessel.scaled_dot_product_attention: dropout_p={dropout_p}: tessel has no "
            "attention dropout; pass 0 (eval mode) or use torch's SDPA for it")
    if attn_mask is not None and is_causal:
        raise ValueError("tessel.scaled_dot_product_attention: attn_mask and is_causal=True "
                         "together (SDPA refuses them too): fold the causal mask into attn_mask")
    lead = query.shape[:-2]
    if query.dim() != key.dim() or key.dim() != value.dim():
        raise ValueError("tessel.scaled_dot_product_attention: query, key and value differ in "
                         f"rank: {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    q, k, v = (_four_dims(x) for x in (query, key, value))
    L, S = q.shape[2], k.shape[2]
    if torch_ops.compiling(q):          # under torch.compile: one node, the mask its input
        mask = None if attn_mask is None else _four_dim_mask(torch, attn_mask, lead, L, S)
        o = torch_ops.sdpa(q, k, v, mask, is_causal, scale, enable_gqa)
    else:
        mods = {} if attn_mask is None else _mods_of(torch, attn_mask, lead, L, S)
        o = attention(q, k, v, causal=is_causal, scale=scale, enable_gqa=enable_gqa, **mods)
    return o.reshape(*lead, *o.shape[-2:])


def _four_dims(x):
    """x as [B, H, N, E]: 3-D as one head, leading dimensions past two folded into B."""
    if x.dim() == 3:
        return x.unsqueeze(1)
    if x.dim() == 4:
        return x
    return x.reshape(-1, *x.shape[-3:])


def _four_dim_mask(torch, attn_mask, lead, L, S):
    """attn_mask broadcast to the scores [*lead, L, S] and seen as _four_dims sees q (stride 0
    where it broadcasts: nothing copied up to four dimensions)."""
    if not isinstance(attn_mask, torch.Tensor):
        raise TypeError("tessel.scaled_dot_product_attention: attn_mask must be a torch tensor, "
                        f"got {type(attn_mask).__name__}")
    if attn_mask.requires_grad and torch.is_grad_enabled():
        raise NotImplementedError(
            "tessel.scaled_dot_product_attention: attn_mask requires grad; tessel computes no "
            "gradient for a mask (detach it, or use torch's SDPA for a learned bias)")
    if attn_mask.dtype != torch.bool and not attn_mask.is_floating_point():
        raise TypeError("tessel.scaled_dot_product_attention: attn_mask must be bool or "
                        f"floating point, got {attn_mask.dtype}")
    try:
        return _four_dims(attn_mask.expand(*lead, L, S))
    except RuntimeError:
        raise ValueError(f"tessel.scaled_dot_product_attention: attn_mask "
                         f"{tuple(attn_mask.shape)} does not broadcast to the scores' "
                         f"{[*lead, L, S]}") from None


def mask_mods(m):
    """tessel.attention's score_mod / mask_mod reading the [B, H, L, S] mask m (None: none).
    Only the dimensions along which m varies are indexed (a dimension of stride 0 or size 1 is
    read at 0): fewer index registers in the kernel, and a mod that does not name `b` or `h`
    gets a block mask shared by every batch or head (blocksparse.auto_block_mask)."""
    if m is None:
        return {}
    vary = tuple(int(m.shape[d] > 1 and m.stride(d) != 0) for d in range(3))
    view = m[tuple(slice(None) if v else 0 for v in vary)]
    if m.is_floating_point():
        return {"score_mod": _ADD[vary](view)}
    return {"mask_mod": _READ[vary](view)}


# (b, h, q) varying -> a mod factory over the view that keeps those dimensions and S.
_READ = {
    (0, 0, 0): lambda m: lambda b, h, q_idx, kv_idx: m[kv_idx],
    (0, 0, 1): lambda m: lambda b, h, q_idx, kv_idx: m[q_idx, kv_idx],
    (0, 1, 0): lambda m: lambda b, h, q_idx, kv_idx: m[h, kv_idx],
    (0, 1, 1): lambda m: lambda b, h, q_idx, kv_idx: m[h, q_idx, kv_idx],
    (1, 0, 0): lambda m: lambda b, h, q_idx, kv_idx: m[b, kv_idx],
    (1, 0, 1): lambda m: lambda b, h, q_idx, kv_idx: m[b, q_idx, kv_idx],
    (1, 1, 0): lambda m: lambda b, h, q_idx, kv_idx: m[b, h, kv_idx],
    (1, 1, 1): lambda m: lambda b, h, q_idx, kv_idx: m[b, h, q_idx, kv_idx],
}
_ADD = {
    (0, 0, 0): lambda m: lambda score, b, h, q_idx, kv_idx: score + m[kv_idx],
    (0, 0, 1): lambda m: lambda score, b, h, q_idx, kv_idx: score + m[q_idx, kv_idx],
    (0, 1, 0): lambda m: lambda score, b, h, q_idx, kv_idx: score + m[h, kv_idx],
    (0, 1, 1): lambda m: lambda score, b, h, q_idx, kv_idx: score + m[h, q_idx, kv_idx],
    (1, 0, 0): lambda m: lambda score, b, h, q_idx, kv_idx: score + m[b, kv_idx],
    (1, 0, 1): lambda m: lambda score, b, h, q_idx, kv_idx: score + m[b, q_idx, kv_idx],
    (1, 1, 0): lambda m: lambda score, b, h, q_idx, kv_idx: score + m[b, h, kv_idx],
    (1, 1, 1): lambda m: lambda score, b, h, q_idx, kv_idx: score + m[b, h, q_idx, kv_idx],
}

# The mods made for recent attn_mask tensors: (weak reference, version, call shape, mods) by
# id. A model's layers pass one mask object; its mods (the same function and captured view)
# then hit tessel.attention's kernel cache and, on CUDA, its block-mask cache: the block mask
# is built once a mask, not once a layer.
_RECENT = {}
_RECENT_MAX = 8


def _mods_of(torch, attn_mask, lead, L, S):
    """mask_mods of attn_mask for a call of scores [*lead, L, S], made once per mask tensor
    (and version)."""
    import weakref
    key = (id(attn_mask), tuple(lead), L, S)
    hit = _RECENT.get(key)
    if hit is not None and hit[0]() is attn_mask and hit[1] == attn_mask._version:
        return hit[2]
    mods = mask_mods(_four_dim_mask(torch, attn_mask, lead, L, S))
    while len(_RECENT) >= _RECENT_MAX:
        _RECENT.pop(next(iter(_RECENT)))
    _RECENT[key] = (weakref.ref(attn_mask), attn_mask._version, mods)
    return mods


class SdpaPatch:
    """The handle patch_sdpa returns: a context manager (the patch is undone on leaving it, or
    by `undo()`), with counts of the calls tessel ran (`tessel_calls`) and of those it handed
    to torch's own SDPA (`torch_calls`, by reason in `reasons`)."""

    def __init__(self):
        self.tessel_calls = 0
        self.torch_calls = 0
        self.reasons = {}
        self._undone = False

    def undo(self):
        if not self._undone:
            self._undone = True
            _unpatch(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.undo()
        return False


_PATCHES = []          # the live handles, oldest first
_ORIGINAL = None       # torch's own function while a patch is live


def patch_sdpa():
    """Routes torch.nn.functional.scaled_dot_product_attention to tessel's: code that calls
    SDPA (Hugging Face models' "sdpa" attention, nn.MultiheadAttention with
    need_weights=False) runs tessel's kernels, unchanged::

        with tessel.patch_sdpa() as p:
            model(batch)
        print(p.tessel_calls, p.torch_calls, p.reasons)

    Calls tessel does not take run torch's own SDPA, counted by reason, with one warning per
    reason: dropout_p > 0 (a model in training mode with attention dropout), an attn_mask that
    requires grad (a learned bias), dtypes other than float16, bfloat16 and float32, tensors
    that are neither CPU nor CUDA, nested tensors. Everything else is tessel's call, with its
    errors. Returns the SdpaPatch (also a context manager); patches nest.
    """
    global _ORIGINAL
    torch = gpu.torch_module()
    if torch is None:
        raise RuntimeError("tessel.patch_sdpa: torch is not importable")
    F = torch.nn.functional
    if _ORIGINAL is None:
        _ORIGINAL = F.scaled_dot_product_attention
        F.scaled_dot_product_attention = _patched
    handle = SdpaPatch()
    _PATCHES.append(handle)
    return handle


def _unpatch(handle):
    global _ORIGINAL
    if handle in _PATCHES:
        _PATCHES.remove(handle)
    if not _PATCHES and _ORIGINAL is not None:
        gpu.torch_module().nn.functional.scaled_dot_product_attention = _ORIGINAL
        _ORIGINAL = None


def _torch_reason(torch, query, key, value, attn_mask, dropout_p):
    """Why a call goes to torch's own SDPA (patch_sdpa), or None for tessel's."""
    if dropout_p:
        return "dropout_p > 0"
    for x in (query, key, value):
        if not isinstance(x, torch.Tensor):
            return "inputs that are not tensors"
        if getattr(x, "is_nested", False):
            return "nested tensors"
        if x.device.type not in ("cpu", "cuda"):
            return f"{x.device.type} tensors"
        if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
            return f"{x.dtype} inputs"
    if isinstance(attn_mask, torch.Tensor) and attn_mask.requires_grad and \
            torch.is_grad_enabled():
        return "an attn_mask that requires grad"
    return None


def _patched(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
             enable_gqa=False):
    torch = gpu.torch_module()
    reason = _torch_reason(torch, query, key, value, attn_mask, dropout_p)
    handle = _PATCHES[-1] if _PATCHES else None
    if reason is None:
        if handle is not None:
            handle.tessel_calls += 1
        return scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal,
                                            scale, enable_gqa)
    if handle is not None:
        handle.torch_calls += 1
        if reason not in handle.reasons:
            import warnings
            warnings.warn(f"tessel.patch_sdpa: {reason}: this call runs torch's own SDPA",
                          stacklevel=2)
        handle.reasons[reason] = handle.reasons.get(reason, 0) + 1
    gqa = {"enable_gqa": True} if enable_gqa else {}     # (torch < 2.5 has no such argument)
    return _ORIGINAL(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                     is_causal=is_causal, scale=scale, **gqa)
