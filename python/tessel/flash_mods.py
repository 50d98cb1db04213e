"""FlashAttention's ``window_size``, ``softcap`` and ``alibi_slopes`` for :func:`tessel.attention`,
as the score_mod and mask_mod they amount to.

FlashAttention users pass these as arguments of ``flash_attn_func``; tessel's kernels take mods,
so each becomes one, composed with the user's own: the scores are scaled, capped (``softcap``),
biased (``alibi_slopes``) and then given to the user's score_mod; the window's mask and the
user's mask_mod are and-ed. Positions are tessel's, top-left aligned as ``causal`` is (query i
against key j; FlashAttention aligns both to the bottom right when Nq != Nk).

The mods are plain closures over numbers (the window, the cap: compile-time constants of the
kernel) and, for ALiBi, over the slopes tensor (a captured tensor: a kernel argument, read at
each call). Equal numbers give the same closure object, so repeated calls keep tessel.attention's
lean path and its kernel.
"""
import numbers

from . import capture
from . import language as tl

# (window, softcap, causal, user score_mod, user mask_mod) -> (score_mod, mask_mod) made once,
# for calls without ALiBi (whose closure holds this call's tensor).
_made = {}
_MADE_MAX = 64


def _window(window_size):
    """(left, right) of a FlashAttention window_size, or None for none ((-1, -1))."""
    if window_size is None:
        return None
    try:
        left, right = window_size
    except (TypeError, ValueError):
        raise ValueError("tessel.attention: window_size must be a pair (left, right) of ints, "
                         f"-1 for no bound on that side, got {window_size!r}") from None
    for name, x in (("left", left), ("right", right)):
        if isinstance(x, bool) or not isinstance(x, numbers.Integral) or x < -1:
            raise ValueError(f"tessel.attention: window_size's {name} bound must be an int >= -1 "
                             f"(-1: unbounded), got {x!r}")
    return None if (left, right) == (-1, -1) else (int(left), int(right))


def _softcap(softcap):
    if softcap is None or (isinstance(softcap, numbers.Real) and not isinstance(softcap, bool)
                           and softcap == 0):
        return None                                  # FlashAttention's 0.0: no cap
    if isinstance(softcap, bool) or not isinstance(softcap, numbers.Real) or not softcap > 0 \
            or softcap == float("inf"):
        raise ValueError(f"tessel.attention: softcap must be a positive number (0: none), got "
                         f"{softcap!r}")
    return float(softcap)


def _slopes(alibi_slopes, q, batch_heads=None, fn="attention"):
    """alibi_slopes checked against q: float32, [H] or [B, H] (batch_heads: (B, H), by default
    q's first two sizes), where q's kernels read it. Returns whether it is per batch."""
    B, H = batch_heads or (q.shape[0], q.shape[1])
    if not capture.is_tensor(alibi_slopes):
        raise TypeError(f"tessel.{fn}: alibi_slopes must be a float32 array (numpy inputs) "
                        "or tensor (CUDA inputs) of shape [H] or [B, H], got "
                        f"{type(alibi_slopes).__name__}")
    shape = tuple(alibi_slopes.shape)
    if shape not in ((H,), (B, H)):
        raise ValueError(f"tessel.{fn}: alibi_slopes has shape {shape}; it must be [H] = "
                         f"[{H}] or [B, H] = [{B}, {H}]")
    if "float32" not in str(alibi_slopes.dtype):
        raise TypeError(f"tessel.{fn}: alibi_slopes must be float32, got "
                        f"{alibi_slopes.dtype}")
    if getattr(alibi_slopes, "is_cuda", False) != getattr(q, "is_cuda", False):
        raise ValueError(f"tessel.{fn}: alibi_slopes must be where q is (a CUDA tensor for "
                         "CUDA inputs, a numpy array for numpy inputs)")
    return len(shape) == 2


def flash_mods(q, causal, window_size, softcap, alibi_slopes, score_mod, mask_mod,
               batch_heads=None, fn="attention"):
    """(score_mod, mask_mod) for a call with FlashAttention's window_size, softcap and
    alibi_slopes (any of them None) and the user's own mods. ValueError / TypeError for values
    FlashAttention would refuse. batch_heads: (B, H) where q is not [B, H, N, D] (the serving
    APIs), for alibi_slopes' shape; fn: the API named in errors."""
    from .attention import _as_jit
    window, cap = _window(window_size), _softcap(softcap)
    if window is None and cap is None and alibi_slopes is None:
        return score_mod, mask_mod
    # The keys a query sees lie at or before it: ALiBi's -|i - j| is then j - i, affine, which
    # the compiler computes a row and a column at a time (tile-separate-bias).
    before = causal or (window is not None and window[1] == 0)
    key = (window, cap, before, score_mod, mask_mod)
    made = _made.get(key) if alibi_slopes is None else None
    if made is not None:
        return made
    # The user's mods as given where nothing is composed with them (a block_mask is checked
    # against the very mask_mod it was made from).
    new_score, new_mask = score_mod, mask_mod
    if cap is not None or alibi_slopes is not None:
        per_batch = alibi_slopes is not None and _slopes(alibi_slopes, q, batch_heads, fn)
        new_score = _score(cap, alibi_slopes, per_batch, before,
                           _as_jit(score_mod, "score_mod"))
    if window is not None:
        new_mask = _mask(window, _as_jit(mask_mod, "mask_mod"))
    if alibi_slopes is None:
        if len(_made) >= _MADE_MAX:
            _made.clear()
        _made[key] = (new_score, new_mask)
    return new_score, new_mask


def _score(cap, slopes, per_batch, before, user):
    """The scores capped, then biased, then the user's score_mod (each step where given)."""
    def flash_score(score, b, h, q_idx, kv_idx):
        s = score
        if cap is not None:
            s = cap * tl.tanh(s / cap)
        if slopes is not None:
            slope = slopes[b, h] if per_batch else slopes[h]
            # -slope · |i - j|: j - i where keys never follow the query, else the smaller of
            # the two.
            if before:
                s = s + slope * (kv_idx - q_idx)
            else:
                s = s + slope * tl.minimum(kv_idx - q_idx, q_idx - kv_idx)
        if user is not None:
            s = user(s, b, h, q_idx, kv_idx)
        return s
    return flash_score


def _mask(window, user):
    """Keys within `window` = (left, right) of the query (-1: no bound), and-ed with the user's
    mask_mod."""
    left, right = window

    def window_mask(b, h, q_idx, kv_idx):
        if left >= 0 and right >= 0:
            m = (kv_idx >= q_idx - left) & (kv_idx <= q_idx + right)
        elif left >= 0:
            m = kv_idx >= q_idx - left
        else:
            m = kv_idx <= q_idx + right
        if user is not None:
            m = m & user(b, h, q_idx, kv_idx)
        return m
    return window_mask
