"""Input checks and layout helpers of the serving entry points (serving.py): which kind of
tensors (numpy or CUDA torch), dtypes, index tensors, strides, block sizes, outputs. Errors name
the entry point and the argument."""
import numbers

import numpy as np

from . import gpu
from .attention import _block, _grad_enabled
from .grid import fold_grid
from .layouts import contiguous_aligned

_I32_MAX = 2**31 - 1


def _refuse_grad(fn, named):
    needs = [n for n, x in named if getattr(x, "requires_grad", False) is True]
    if needs and _grad_enabled():
        raise NotImplementedError(
            f"tessel.{fn}: {', '.join(needs)} require{'s' if len(needs) == 1 else ''} grad, but "
            f"tessel.{fn} has no backward pass yet: detach the inputs or run under "
            "torch.no_grad() (inference)")


def _is_cuda(x):
    return gpu.is_torch_tensor(x)


def _kind(fn, named):
    """'cuda' or 'numpy' for the tensors in `named`, which must all be of one kind."""
    cuda = [n for n, x in named if _is_cuda(x)]
    if cuda and len(cuda) != len(named):
        other = next(n for n, x in named if not _is_cuda(x))
        raise TypeError(f"tessel.{fn}: {cuda[0]} is a torch tensor but {other} is a "
                        f"{type(dict(named)[other]).__name__}: pass all CUDA torch tensors "
                        "(GPU) or all numpy arrays (CPU interpreter)")
    if cuda:
        for n, x in named:
            if not x.is_cuda:
                raise TypeError(f"tessel.{fn}: {n} is on {x.device}: CUDA tensors run on the "
                                "GPU, numpy arrays on the CPU interpreter")
        return "cuda"
    for n, x in named:
        if not isinstance(x, np.ndarray):
            raise TypeError(f"tessel.{fn}: {n} must be a numpy array or a CUDA torch tensor, "
                            f"got {type(x).__name__}")
    return "numpy"


def _dtype_name(x):
    return gpu.torch_dtype_name(x) if _is_cuda(x) else str(x.dtype)


_NUMPY_DTYPES = ("float32", "float16", "uint16")
_TORCH_DTYPES = ("f16", "bf16", "f32")


def _check_same_dtype(fn, named):
    names = [_dtype_name(x) for _, x in named]
    if len(set(names)) != 1:
        listed = ", ".join(f"{n} {d}" for (n, _), d in zip(named, names))
        raise TypeError(f"tessel.{fn}: {listed} must have one dtype")
    ok = _TORCH_DTYPES if _is_cuda(named[0][1]) else _NUMPY_DTYPES
    if names[0] not in ok:
        raise TypeError(f"tessel.{fn}: {named[0][0]} is {names[0]}; use "
                        + (", ".join(ok[:2]) + " or bf16 as uint16 bit patterns"
                           if ok is _NUMPY_DTYPES else "float16, bfloat16 or float32"))


def seqlens_of_int(n, q):
    """FlashAttention's cache_seqlens given as one int: that many keys for every sequence, as
    an int32 array (numpy q) or tensor on q's device (torch q) of q's batch. Anything else is
    returned as it is, for _check_index."""
    if not isinstance(n, numbers.Integral) or isinstance(n, bool):
        return n
    if len(getattr(q, "shape", ())) != 4:
        return n                  # q's own check says what is wrong
    if gpu.is_torch_tensor(q):
        torch = gpu.torch_module()
        return torch.full((q.shape[0],), int(n), dtype=torch.int32, device=q.device)
    return np.full((q.shape[0],), int(n), np.int32)


def _check_index(fn, name, x, ndim, kind, q):
    """An int32 index tensor (cu_seqlens, cache_seqlens, block_table) of rank `ndim`."""
    if kind == "cuda":
        if not _is_cuda(x) or not x.is_cuda or x.get_device() != q.get_device():
            raise TypeError(f"tessel.{fn}: {name} must be a CUDA int32 tensor on q's device "
                            f"({q.device})")
        ok = gpu.torch_dtype_name(x) == "i32"
    else:
        if not isinstance(x, np.ndarray):
            raise TypeError(f"tessel.{fn}: {name} must be a numpy int32 array, got "
                            f"{type(x).__name__}")
        ok = x.dtype == np.int32
    if not ok:
        raise TypeError(f"tessel.{fn}: {name} must be int32, got {_dtype_name(x)}")
    if len(x.shape) != ndim:
        raise ValueError(f"tessel.{fn}: {name} must have {ndim} dimension"
                         f"{'s' if ndim > 1 else ''}, got shape {tuple(x.shape)}")
    if kind == "cuda" and not x.is_contiguous():
        x = x.contiguous()
    return x if kind == "cuda" else np.ascontiguousarray(x)


def _check_heads(fn, H, Hkv, D):
    """The head counts (Hkv divides H: GQA / MQA) and the head dim (at least 1)."""
    if D == 0:
        raise ValueError(f"tessel.{fn}: head dim 0: attention needs a head dim of at least 1")
    if Hkv == 0 or H % Hkv:
        raise ValueError(f"tessel.{fn}: the number of query heads ({H}) must be a multiple of "
                         f"the number of key/value heads ({Hkv})")


def _strided(x):
    """(x, row stride, head stride) for a tensor [..., rows, heads, D] whose leading axes merge
    into one row axis: read in place through those strides (a slice of a packed qkv tensor
    too). Any other layout, and numpy arrays (the interpreter takes whole buffers), are made
    contiguous first."""
    if _is_cuda(x):
        st, sh = x.stride(), x.shape
        merged = all(st[a] == st[a + 1] * sh[a + 1] for a in range(len(sh) - 3))
        if st[-1] == 1 and merged and (sh[-3] <= 1 or st[-3] > 0) and x.data_ptr() % 16 == 0:
            return x, st[-3], st[-2]
        x = contiguous_aligned(x)   # layouts.py: copied where its rows' chunks would fault
    else:
        x = np.ascontiguousarray(x)
    return x, x.shape[-2] * x.shape[-1], x.shape[-1]


def _blocks(kind, D, dtype, n_q, n_k):
    """(BLOCK_M, BLOCK_N): small blocks for the interpreter, the reference lowering's on the GPU
    (at most 64 rows at head dim <= 64, 32 above: its tiles live in shared memory)."""
    cap = 64 if kind == "numpy" or D <= 64 else 32
    return _block(n_q, cap), _block(n_k, cap)


# Head dims whose attention_varlen calls take the fast paths' 64x64 blocks (_fast_blocks; the
# cache kernels': KVCACHE_FAST_HEAD_DIMS). 256 compiles there with 0 spill on both chips
# (sm_90a wgmma: 243-253 registers, sm_80 mma.sync: 255; test_serving_fast_paths.py), and head
# dims 129-255 go there padded (serving._varlen_padded_dim): on since its GPU check against
# float32 (H100, 2026-12-06: test_serving_gpu.py `test_varlen_at_head_dim_256`, d256 and d192),
# where the reference lowering ran them before.
VARLEN_FAST_HEAD_DIMS = (64, 128, 256)

# Whether attention_varlen runs a head dim it would pad (96, 80, 40, ...: VARLEN_FAST_HEAD_DIMS)
# on the fast paths' kernels at the padded head dim without copying q, k and v: the varlen
# kernel's blocks DB wide, columns past D read as 0 (as KVCACHE_BLOCK_HEAD_DIM's kernels); for
# calls without gradients (the varlen backward pads), v of q's head dim, D a multiple of 8. On
# since its GPU check (H100, 2026-12-06: `test_varlen_block_head_dim` 16/16 at 96, 80, 40, 160;
# fp16 TFLOP/s copied padded -> padded in the kernel: d96 321 -> 345, causal 263 -> 329; d80
# 279 -> 300, causal 230 -> 284: docs/bench/2026-12-06-h100-s42.md).
VARLEN_BLOCK_HEAD_DIM = True
# Whether attention_varlen calls with gradients take VARLEN_BLOCK_HEAD_DIM's DB too, where the
# block-sparse backward varlen_backward runs takes it (attention.BLOCK_HEAD_DIM_SPARSE,
# backward.BLOCK_HEAD_DIM_CHIPS): the forward's kernel and the backward's programs over the
# packed tensors as they are, nothing padded or saved padded. On since its GPU check
# (test_serving_gpu.py `test_varlen_block_head_dim_gradients`, 8/8 on an H100, 2026-12-06,
# docs/bench/2026-12-06-h100-s45.md); off, such calls pad, on copies.
VARLEN_BLOCK_HEAD_DIM_GRAD = True

# chip -> head dims attention_varlen runs as they are on the fast paths' 64x64 blocks instead of
# padded (to 256: VARLEN_FAST_HEAD_DIMS), for calls that need no gradient (the varlen backward's
# programs pad). sm_90a 192 (wgmma's three slabs, as the dense forward's
# attention.NATIVE_HEAD_DIMS): 182/202 registers and no spill (test_serving_fast_paths.py),
# three quarters of the padded work. On since its GPU check (H100, 2026-12-06:
# `test_varlen_native_192` passed; fp16 TFLOP/s padded -> native 249 -> 354, causal 210 -> 331:
# docs/bench/2026-12-06-h100-s42.md).
VARLEN_NATIVE_HEAD_DIMS = {"sm_90a": (192,)}

# Whether attention_varlen runs a v of its own head dim through the varlen kernel's DV (P·V and
# o at v's width, as attention.VALUE_HEAD_DIM_KERNEL does for tessel.attention) instead of
# padding the smaller side: forward calls (no gradient wanted); on CUDA on sm_90a, fp16/bf16,
# where both head dims are ones the fast paths take as they are (DeepSeek's MLA prefill, q/k
# 192 and v 128, needs VARLEN_NATIVE_HEAD_DIMS' 192). On the interpreter it gives the padded
# call's answer (test_cpu_tensors.py); on since its GPU check (H100, 2026-12-06:
# test_serving_gpu.py `test_varlen_value_head_dim_kernel` passed).
VARLEN_VALUE_HEAD_DIM_KERNEL = True

# chip -> {the blocks' head dim: (BLOCK_M, BLOCK_N)}: attention_varlen's default blocks on the
# fast paths where they are not 64x64 (v of q's head dim). sm_90a: 128x128 at 128 (two
# consumer warpgroups and a producer, K and V by TMA, as the dense kernels'), 128x64 at 256
# (128x128 needs 320 KiB of shared memory); 0 spill. H100 (forty-eighth session,
# docs/bench/2026-12-07-h100-s48.md): 64 sequences of 1-8k, fp16, TFLOP/s against 64x64 —
# d128 +15 % non-causal, +11 % causal (GQA 32/8: +16 %, +9 %), d256 +68 %, +55 %; d64 at
# 128x128 -0 % / -10 %, so it keeps 64x64. GPU cases passed at these blocks (test_varlen
# "wide"/"tall" 40/40, d256/d192 and DB cases, the varlen backward 34/34, the CUDA fuzzer).
VARLEN_BLOCKS = {"sm_90a": {128: (128, 128), 256: (128, 64)}}


# The varlen kernels' compact grid (varlen_program's TILES): the batch's query blocks, about
# total_q / BLOCK_M + B programs a head, each program's sequence from a map made per call
# (varlen_grid), instead of B times the longest sequence's blocks — a chunk of 2k queries beside
# 255 decode steps launched 32 x 256 programs a head for 32 + 255 that do anything, and each
# empty one still pays a CTA's start. Taken where it launches fewer programs. On the
# interpreter, and on CUDA since its GPU check (H100, forty-ninth session: test_serving_gpu.py
# compact_grid 36/36 and varlen_paged *_tiles, the varlen cases 272/272 and the CUDA fuzzer's
# serving cases with it on): a chunk of 2048 beside 127 decode steps 1.71x at 4k keys, 1.16x at
# 16k; the mixed batch 1.06x / 1.02x; 64 sequences of 1-8k 0.98-1.02x
# (docs/bench/2026-12-07-h100-s49.md).
VARLEN_TILES = True
VARLEN_TILES_CUDA = True
_ARANGES = {}

# Whether CUDA attention_varlen calls take seqused_k without block_table (the key counts inside
# packed spans: key_bounds, the kernels' USED_K); the interpreter always does. On since
# test_serving_gpu.py -k seqused passed (2026-12-07, an H100: 40 passed, 4 skipped;
# bench/results/2026-12-07-s53/out/run1).
PACKED_SEQUSED_CUDA = True


def key_bounds(fn, kind, q, cu_k, seqused_k):
    """cu_k (checked, B + 1 entries) followed by seqused_k (int32 [B]), the table the varlen
    kernels read with USED_K (serving_kernels.key_span). numpy: counts outside [0, the span]
    are a ValueError (the GPU clamps them to the span)."""
    B = cu_k.shape[0] - 1
    used = _check_index(fn, "seqused_k", seqused_k, 1, kind, q)
    if used.shape[0] != B:
        raise ValueError(f"tessel.{fn}: seqused_k has {used.shape[0]} entries for {B} "
                         "sequences")
    if kind == "numpy":
        bad = (used < 0) | (used > np.diff(cu_k))
        if bad.any():
            b = int(np.argmax(bad))
            raise ValueError(f"tessel.{fn}: seqused_k[{b}] = {int(used[b])} keys, but sequence "
                             f"{b} spans {int(cu_k[b + 1] - cu_k[b])} rows of k "
                             "(cu_seqlens_k)")
        return np.concatenate([cu_k, used])
    return gpu.torch_module().cat([cu_k, used])


def varlen_grid(kind, cu, B, total, max_n, block, H, on=None):
    """(grid, (tiles, n_tiles), constexprs) of a varlen launch over blocks of `block` rows of
    the sequences `cu` spans, H programs' rows: the compact grid (varlen_tile_map; the
    constexprs {"TILES": True}) where it launches fewer programs than the full one and is on
    (`on`, else VARLEN_TILES_CUDA / VARLEN_TILES), else B × the longest sequence's `max_n`
    rows in blocks (tiles = (cu, 0), unread; no constexprs)."""
    if on is None:
        on = VARLEN_TILES_CUDA if kind == "cuda" else VARLEN_TILES
    n = total // block + B
    if not on or B == 0 or n >= -(-max_n // block) * B:
        return fold_grid(-(-max_n // block), B * H), (cu, 0), {}
    return fold_grid(n, H), (varlen_tile_map(kind, cu, B, block, n), n), {"TILES": True}


def varlen_tile_map(kind, cu_q, B, BM, n):
    """The compact grid's map, int32 [n] on cu_q's device: sequence b owns tiles
    cu_q[b] // BM + b to cu_q[b + 1] // BM + b (at least its ceil(nq_b / BM) blocks; n =
    total_q // BM + B covers the last), tiles[p] counts the sequences owning p or less (their
    starts are sorted). varlen_program reads it."""
    if kind == "numpy":
        starts = cu_q[:-1].astype(np.int64) // BM + np.arange(B)
        return np.searchsorted(starts, np.arange(n), side="right").astype(np.int32)
    torch = gpu.torch_module()
    size = 1 << (max(n, B) - 1).bit_length()
    ar = _ARANGES.get((cu_q.device, size))
    if ar is None:
        if len(_ARANGES) > 64:
            _ARANGES.clear()
        ar = _ARANGES[cu_q.device, size] = torch.arange(size, dtype=torch.int32,
                                                        device=cu_q.device)
    starts = cu_q[:-1] // BM + ar[:B]
    return torch.searchsorted(starts, ar[:n], right=True, out_int32=True)


def varlen_blocks(chip, W, fast):
    """attention_varlen's fast-path blocks for blocks W wide on `chip`: VARLEN_BLOCKS' entry,
    else `fast` (64x64)."""
    return VARLEN_BLOCKS.get(chip, {}).get(W, fast)


# The one-program cache kernels' key block (kvcache_kernel, varlen_cache_kernel; not the split
# program's) at blocks 256 wide over pages that the fast key block does not divide (vLLM's 16,
# 32, 7...; each row looked up): 64x64 spills there (sm_90a page 16 212 bytes, 32 184, 7 40,
# the scale fold given up; sm_80 page 16 16), 64x32 compiles with 0 (test_serving_fast_paths.py).
# 32 since its GPU check (forty-eighth session, H100: `test_kvcache_256_small_pages` 8/8
# against float64; 1.23-1.50x 64x64's speed on prefill chunks against pages of 16 and 32,
# docs/bench/2026-12-07-h100-s48.md); 0: the fast blocks' own.
SMALL_PAGE_256_BLOCK_N = 32


def cache_kernel_blocks(fast, W, page):
    """The one-program cache kernels' fast blocks for blocks W wide over pages of `page` rows
    (0: a contiguous cache): SMALL_PAGE_256_BLOCK_N's key block where it applies, else
    `fast`."""
    if fast and SMALL_PAGE_256_BLOCK_N and W == 256 and page and page % fast[1]:
        return fast[0], SMALL_PAGE_256_BLOCK_N
    return fast


# Head dims whose attention_with_kvcache calls take the fast paths' 64x64 blocks by default
# (_fast_blocks), the split-KV program (decode) and the cache kernel alike. 256 (Gemma's head
# dim) compiles on both chips: the split-KV program with 0 spill, contiguous and paged; the
# cache kernel too but for pages of 16 rows (212 bytes on sm_90a; test_serving_fast_paths.py).
# 256 on since its GPU check (H100, 2026-12-06: `test_kvcache_at_head_dim_256` 24/24 against
# float64; decode at d256 1,555-3,088 GB/s, 1.04-1.07x cuDNN, where the reference lowering's
# blocks read 103-109: docs/bench/2026-12-06-h100-s42.md).
KVCACHE_FAST_HEAD_DIMS = (64, 128, 256)

# Whether attention_with_kvcache's CUDA calls take cache_leftpad (the cache kernels' LEFTPAD:
# the key loop and the splits from each sequence's padding): on since test_serving_gpu.py's
# `test_kvcache_batch_index_leftpad` passed on an H100, 9/9 (bench/results/2026-12-07-s47/out).
LEFTPAD_CHECKED = True

# Whether attention_with_kvcache runs a cache of a head dim those do not list (96, 80, 192,
# ...) on the fast paths' kernels at the next head dim they do, the blocks' extra columns read
# as 0 inside the kernels (their DB constexpr): padding the cache would copy it every call, so
# such calls took the reference lowering's blocks. On since its GPU check (H100, 2026-12-06:
# test_serving_gpu.py `test_kvcache_block_head_dim` 32/32 against float64 at 96, 80, 192, 40;
# decode at d96 1,015-2,737 GB/s, 0.93-0.96x cuDNN, at d192 1,230-2,939, 1.00-1.21x cuDNN:
# docs/bench/2026-12-06-h100-s42.md).
KVCACHE_BLOCK_HEAD_DIM = True


def kvcache_block_head_dim(kind, dtype, D, dims):
    """The serving kernels' DB for a cache of head dim D: the smallest of `dims` above D where
    KVCACHE_BLOCK_HEAD_DIM is on, for CUDA f16/bf16 and D a multiple of 8 (the loads bound a
    block's columns by whole 16-byte chunks); else 0 (the blocks are D wide)."""
    if not KVCACHE_BLOCK_HEAD_DIM or kind != "cuda" or dtype not in ("f16", "bf16") or \
            D in dims or D % 8:
        return 0
    return min((d for d in dims if d > D), default=0)


def _fast_blocks(kind, dtype, D, strides, dims):
    """(64, 64) where the serving kernels (varlen, the cache kernel, the split-KV program) take
    the GPU's fast paths, else None (the reference lowering's blocks stay): CUDA f16/bf16 at
    head dims `dims` (VARLEN_FAST_HEAD_DIMS, KVCACHE_FAST_HEAD_DIMS), row and head strides of
    whole 16-byte chunks (cp.async). Any page size:
    a page that the key block divides is looked up once per block (the next ahead of its copy),
    others row by row (a paged descriptor). test_serving_gpu.py's cases at 64x64 passed on the
    H200 on 2026-12-02; against the reference lowering's blocks decode measured 1.02x cuDNN
    instead of 0.04-0.12x (docs/bench/2026-12-02-h200-decode.md)."""
    if kind != "cuda" or dtype not in ("f16", "bf16") or D not in dims:
        return None
    if any(s % 8 for s in strides):
        return None
    return 64, 64


def _out(kind, q, shape, dtype_like=None):
    if kind == "numpy":
        return np.zeros(shape, dtype=q.dtype if dtype_like is None else dtype_like)
    torch = gpu.torch_module()
    return q.new_empty(shape, dtype=torch.float32) if dtype_like is not None else \
        q.new_empty(shape)


def _launch(kernel, grid, args, constexprs):
    if grid[0] and grid[1]:
        kernel[grid](*args, **constexprs)


def _block_arg(fn, name, value, default):
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 16 or value & (value - 1):
        raise ValueError(f"tessel.{fn}: {name} must be a power of two >= 16, got {value!r}")
    return value
