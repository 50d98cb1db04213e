"""Tensor layouts the attention kernels read in place on CUDA.

A kernel reads each [B, heads, N, D] tensor through a descriptor per (batch, head): contiguous
tensors with rows D apart (the default), or — where the layout constexprs `X_RS`, `X_HS` are
set — rows X_RS elements apart, heads X_HS apart and batch b's rows after b·N rows: a
[B, N, H, D] tensor seen as [B, H, N, D] (FlashAttention's layout, `x.transpose(1, 2)`), the
q/k/v of a packed [B, N, 3, H, D] qkv. The strides are compile-time values (the fast paths copy
rows in 16-byte chunks at constant strides): one specialisation per layout, whatever N.
docs/bench/2026-12-03-h200-layouts.md measured it.
"""
from . import language as tl
from .jit import CompileOptions, jit

# The options of the kernels whose inputs pass through in_place or contiguous_aligned: every
# tensor and row stride is 16-byte aligned (the fast paths' head dims, 64/128/256 16-bit
# elements, keep each row's origin so), so their TMA copies need no run-time check nor a
# cp.async copy beside it (GpuOptions.tma_only: an eighth less PTX at d128). sm_90a runs on
# CC 9.0 devices only, of at most 144 SMs: under the 256 the maps' slots allow.
ALIGNED_INPUTS = CompileOptions(tma_only=True)


@jit
def rows_desc(x, n, D: tl.constexpr, rows, b, h, RS: tl.constexpr, HS: tl.constexpr):
    """The [n, D] block of one (batch, head) of x: `rows` rows into a contiguous [B, heads, N, D]
    x when RS = 0; else rows RS elements apart, head h at h·HS, batch b after b·n rows."""
    if RS == 0:
        return tl.make_desc(x, shape=(n, D), strides=(D, 1), offset=rows * D)
    return tl.make_desc(x, shape=(n, D), strides=(RS, 1), offset=b * n * RS + h * HS)


@jit
def seq_rows_desc(x, n, D: tl.constexpr, row0, total, h, RS: tl.constexpr, HS: tl.constexpr):
    """The [n, D] rows [row0, row0 + n) of head h of x seen as [1, heads, total, D] (a packed
    sequence's rows; rows_desc's layouts: contiguous when RS = 0, else rows RS elements apart
    and head h at h·HS, as a packed [total, heads, D] tensor is)."""
    if RS == 0:
        return tl.make_desc(x, shape=(n, D), strides=(D, 1), offset=(h * total + row0) * D)
    return tl.make_desc(x, shape=(n, D), strides=(RS, 1), offset=row0 * RS + h * HS)


def row_layout(x):
    """(row stride, head stride) in elements of a CUDA tensor [B, heads, N, D] read in place:
    (0, 0) when contiguous; else where its last axis is contiguous and batch b's rows follow
    b·N rows (batch stride N × row stride, or one batch), the strides and the data 16-byte
    aligned (the fast paths copy rows in 16-byte chunks). None: copy it first."""
    if x.data_ptr() % 16:
        return None
    if x.is_contiguous():
        return 0, 0
    if x.dim() != 4:
        return None
    B, heads, N, D = x.shape
    sb, sh, sn, sd = x.stride()
    size = x.element_size()
    if N == 1 or (sd != 1 and D != 1):
        return None
    sh = 0 if heads == 1 else sh
    if (B != 1 and sb != N * sn) or sn <= 0 or sh < 0 or (sn * size) % 16 or (sh * size) % 16:
        return None
    return sn, sh


def contiguous_aligned(x):
    """x contiguous at a 16-byte-aligned address: x itself, or a copy (a contiguous view that
    starts mid-chunk, `buf[1:]`, is copied too — its rows' 16-byte copies would fault)."""
    if x.is_contiguous():
        return x if x.data_ptr() % 16 == 0 else x.clone()
    return x.contiguous()


def in_place(x):
    """x itself where row_layout reads it in place, else a contiguous aligned copy."""
    return x if row_layout(x) is not None else contiguous_aligned(x)


def output_like(q, torch, Dv=None):
    """The output: contiguous [B, H, N, D] for a contiguous q; for q read in place, a
    [B, N, H, D] buffer seen as [B, H, N, D] (what SDPA's flash backend returns for such q).
    `Dv`: v's head dim, the output's, where it is not q's."""
    B, H, N, D = q.shape
    Dv = D if Dv is None else Dv
    if q.is_contiguous():
        return torch.empty_like(q) if Dv == D else q.new_empty((B, H, N, Dv))
    return q.new_empty((B, N, H, Dv)).transpose(1, 2)


def layout_constexprs(**tensors):
    """The layout constexprs of tensors row_layout accepts, by prefix: layout_constexprs(Q=q)
    gives {"Q_RS": ..., "Q_HS": ...}."""
    out = {}
    for name, x in tensors.items():
        out[f"{name}_RS"], out[f"{name}_HS"] = row_layout(x)
    return out


# attention_kernel's layout constexprs, in the order of its signature.
ATTENTION_LAYOUT = ("Q_RS", "Q_HS", "K_RS", "K_HS", "V_RS", "V_HS", "O_RS", "O_HS")


def lean_layout(q, k, v):
    """ATTENTION_LAYOUT's values when q, k and v are all read in place, the output laid out as
    output_like makes it; None where one needs a copy."""
    lays = [row_layout(x) for x in (q, k, v)]
    if None in lays:
        return None
    _, H, _, D = q.shape
    out = (0, 0) if lays[0] == (0, 0) or H == 1 else (H * D, D)   # row_layout of the output
    return tuple(x for pair in lays + [out] for x in pair)
