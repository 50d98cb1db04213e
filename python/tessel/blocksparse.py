"""Run-time block sparsity: tessel.block_mask and the attention kernel whose key loop it drives.

`block_mask(mask_mod, B, H, Nq, Nk)` runs `block_state_kernel`, a DSL program with one program
per (query block, b, h): it evaluates the mask_mod on every (query block, key block) tile and
classifies the block as empty (no pair allowed), full (every pair allowed, and no key past Nk in
the block) or partial into an int32 array of block states; `block_lists` then keeps per row the
key-block indices of the partial and of the full blocks in two compact lists (a stable sort),
FlexAttention's layout (create_block_mask):

    kv_num_blocks      int32 [B', H', NQB]        partial blocks of each query block
    kv_indices         int32 [B', H', NQB, NKB]   their key-block indices, ascending; the tail
                                                  past kv_num_blocks holds 0
    full_kv_num_blocks int32 [B', H', NQB]        full blocks
    full_kv_indices    int32 [B', H', NQB, NKB]

B' = B or 1 and H' = H or 1 (None broadcasts: the mask_mod is evaluated with b = 0 / h = 0 and
the lists serve every batch / head). Only pairs with q_idx < Nq and kv_idx < Nk are looked at.

`block_sparse_attention_kernel` is attention_kernel with an indirect key loop: one loop over the
full blocks (`j = load_scalar(full_kv_indices, (row, t)) * MASK_N`) without any mask
arithmetic, then one over the partial blocks with the mask_mod (and `kv_idx < nk`) applied,
both carrying one online-softmax state (online_softmax_step, in the form tile-optimize gives a
streamed softmax). Rows that see no key get 0 and LSE -inf. The kernel's blocks divide the
mask's: a 128x128 mask block (the GPU default, FlexAttention's) is walked in blocks of
tessel.attention's own size for the head dim and chip (kernel_blocks), so the fast paths take
it: they issue the copies of later iterations from the list (`list[t + 1]` is computed ahead),
and gathers of captured tensors are read into registers.

On the GPU at 128x128 kernel blocks the kernel runs persistent (its PERSISTENT form: one
program an SM walking the tiles BlockMask.schedule hands it; grid.persistent_programs).

block_state_kernel looks at a block EVAL_PAIRS pairs at a time, flattened into one row: on the
GPU its tiles stay in registers (convert-tile-to-blocked, gathers of captured tensors included).
"""

import weakref

import numpy as np

from . import capture
from . import cpu_tensors
from . import gpu
from . import language as tl
from .backward import log2_scores, masked
from .grid import block_and_row, fold_grid, greedy_schedule, persistent_programs, \
    program_tiles, schedule_switches, short_tiles, with_switches
from .jit import jit
from .layouts import ALIGNED_INPUTS, contiguous_aligned


@jit
def list_descs(num, idx, full_num, full_idx, n_rows, width):
    """The descriptors of a block mask's four arrays seen as rows: the partial count and list,
    the full count and list (n_rows rows of `width` slots)."""
    return (tl.make_desc(num, shape=(n_rows,), strides=(1,)),
            tl.make_desc(idx, shape=(n_rows, width), strides=(width, 1)),
            tl.make_desc(full_num, shape=(n_rows,), strides=(1,)),
            tl.make_desc(full_idx, shape=(n_rows, width), strides=(width, 1)))


@jit
def block_state_kernel(state, nq, nk, HB, n_rows, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       EVAL: tl.constexpr, MASK_MOD: tl.constexpr, CAUSAL: tl.constexpr = False):
    # Grid as attention_kernel's: query blocks on x, (b, h) of the block mask on y, folded.
    # state[row, kb]: 1 partial, 2 full (0 empty), + 4 where some pair's verdict differs from
    # q_idx >= kv_idx (BlockMask.is_causal). A block is looked at EVAL pairs at a time, row
    # after row flattened into one [1, EVAL] tile: the counts are one row reduction each, so
    # the program stays in convert-tile-to-blocked's class (registers) with any mask_mod of
    # element-wise ops and gathers.
    n_qb = tl.cdiv(nq, BLOCK_M)
    n_kb = tl.cdiv(nk, BLOCK_N)
    pid_m, bh = block_and_row(n_qb)
    b = bh // HB
    h = bh % HB
    row = bh * n_qb + pid_m
    out = tl.make_desc(state, shape=(n_rows, n_kb), strides=(n_kb, 1))
    m0 = pid_m * BLOCK_M
    e = tl.arange(0, EVAL)[None, :]
    rows_in = tl.minimum(nq - m0, BLOCK_M)
    kb_end = n_kb
    if CAUSAL:           # q_idx >= kv_idx is in the mask: past the diagonal, left empty (0)
        kb_end = tl.minimum(n_kb, tl.cdiv(m0 + BLOCK_M, BLOCK_N))
    for kb in range(0, kb_end):
        j = kb * BLOCK_N
        ok = tl.zeros((1, EVAL), tl.float32)
        off = tl.zeros((1, EVAL), tl.float32)
        for p in range(0, BLOCK_M * BLOCK_N // EVAL):
            flat = e + p * EVAL
            q_idx = m0 + flat // BLOCK_N
            kv_idx = j + flat % BLOCK_N
            valid = (q_idx < nq) & (kv_idx < nk)
            allowed = valid & MASK_MOD(b, h, q_idx, kv_idx)
            ok = ok + allowed.to(tl.float32)
            off = off + (allowed != (valid & (q_idx >= kv_idx))).to(tl.float32)
        n_ok = tl.sum(ok, axis=1)                           # (1,): exact in float32
        n_off = tl.sum(off, axis=1)
        # Full: every pair allowed and no padded key (the full loop masks nothing, not even
        # kv_idx < nk). Padded query rows are never stored, so they do not count.
        n_valid = (rows_in * tl.minimum(nk - j, BLOCK_N)).to(tl.float32)
        is_full = (n_ok == n_valid) & (j + BLOCK_N <= nk)
        is_part = (n_ok > 0) & (is_full == 0)
        code = is_part.to(tl.int32) + 2 * is_full.to(tl.int32) + 4 * (n_off > 0).to(tl.int32)
        tl.store(out, (row, kb), code[:, None])


def block_lists(m):
    """(counts [..., NQB], ascending indices [..., NQB, NKB], 0 past the count), int32, of the
    key blocks set in the bool array m [..., NQB, NKB]: numpy arrays or torch tensors, as m."""
    if gpu.is_torch_tensor(m):
        torch = gpu.torch_module()
        order = (~m).to(torch.uint8).sort(dim=-1, stable=True).indices
        counts = m.sum(-1)
        slot = torch.arange(m.shape[-1], device=m.device)
        idx = torch.where(slot < counts[..., None], order, 0)
        return counts.to(torch.int32), idx.to(torch.int32)
    order = np.argsort(~m, axis=-1, kind="stable")
    counts = m.sum(-1)
    idx = np.where(np.arange(m.shape[-1]) < counts[..., None], order, 0)
    return counts.astype(np.int32), idx.astype(np.int32)


@jit
def online_softmax_step(acc, m, l, s2, vt):
    """One key block of the online softmax, scores `s2` in log2 units (−inf where masked):
    the running row max `m`, row sum `l` and output `acc` after the block. A row that has seen
    no key keeps m = −inf, l = 0, acc = 0. The form tile-optimize gives a streamed softmax, so
    the fast paths lower it as they lower tessel.attention's loop."""
    m_new = tl.maximum(m, tl.max(s2, axis=1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(m - m_safe)
    p = tl.exp2(s2 - m_safe[:, None])
    l = l * alpha + tl.sum(p, axis=1)
    acc = tl.dot(p.to(vt.dtype), vt, acc * alpha[:, None])
    return acc, m_new, l


@jit
def attention_block(acc, m, l, lists, row, t, kd, vd, qt, q_idx, scale, b, h, nk,
                    D: tl.constexpr, BLOCK_N: tl.constexpr, MASK_N: tl.constexpr,
                    PARTIAL: tl.constexpr, SCORE_MOD: tl.constexpr, MASK_MOD: tl.constexpr):
    """The online-softmax state after the t-th kernel key block of list row `row` (a mask
    block is MASK_N // BLOCK_N kernel blocks); the mask only in partial blocks."""
    R_N = MASK_N // BLOCK_N
    j = tl.load_scalar(lists, (row, t // R_N)) * MASK_N + (t % R_N) * BLOCK_N
    kt = tl.load(kd, (j, 0), shape=(BLOCK_N, D))
    kv_idx = tl.broadcast_to((j + tl.arange(0, BLOCK_N))[None, :], q_idx.shape)
    s2, s_mod, s_raw = log2_scores(tl.dot(qt, kt.T), scale, b, h, q_idx, kv_idx, SCORE_MOD)
    if PARTIAL:
        s2 = masked(s2, b, h, q_idx, kv_idx, kv_idx < nk, False, MASK_MOD)
    vt = tl.load(vd, (j, 0), shape=(BLOCK_N, D))
    return online_softmax_step(acc, m, l, s2, vt)


@jit
def block_sparse_tile(q, k, v, o, lse_out, kv_num, kv_idx_in, full_num, full_idx_in, pid_m, bh,
                      nq, nk, H, HKV, scale, bm_sb, bm_sh, n_rows,
                      D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      MASK_M: tl.constexpr, MASK_N: tl.constexpr,
                      SCORE_MOD: tl.constexpr, MASK_MOD: tl.constexpr, DB: tl.constexpr = 0):
    """Query block `pid_m` of batch·head row `bh`: its output and LSE. DB: the blocks' head dim
    where it is not D (0: D), as attention_tile's: columns past D read as 0, o stored D wide."""
    # The kernel's blocks divide the block mask's (MASK_M x MASK_N): a mask block is R_M query
    # blocks and R_N key blocks of the kernel.
    R_M = MASK_M // BLOCK_M
    R_N = MASK_N // BLOCK_N
    W = D if DB == 0 else DB
    n_kb = tl.cdiv(nk, MASK_N)
    b = bh // H
    h = bh % H
    kv_h = h // (H // HKV)
    q_rows = bh * nq
    kv_rows = (b * HKV + kv_h) * nk
    qd = tl.make_desc(q, shape=(nq, D), strides=(D, 1), offset=q_rows * D)
    kd = tl.make_desc(k, shape=(nk, D), strides=(D, 1), offset=kv_rows * D)
    vd = tl.make_desc(v, shape=(nk, D), strides=(D, 1), offset=kv_rows * D)
    od = tl.make_desc(o, shape=(nq, D), strides=(D, 1), offset=q_rows * D)
    ld = tl.make_desc(lse_out, shape=(nq,), strides=(1,), offset=q_rows)
    # The block mask's row of this (b, h, query block): strides 0 where it broadcasts.
    row = b * bm_sb + h * bm_sh + pid_m // R_M
    cnd, idd, fcnd, fidd = list_descs(kv_num, kv_idx_in, full_num, full_idx_in, n_rows, n_kb)

    m0 = pid_m * BLOCK_M
    qt = tl.load(qd, (m0, 0), shape=(BLOCK_M, W))
    q_idx = tl.broadcast_to((m0 + tl.arange(0, BLOCK_M))[:, None], (BLOCK_M, BLOCK_N))
    acc = tl.zeros((BLOCK_M, W), tl.float32)
    m = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l = tl.zeros((BLOCK_M,), tl.float32)

    # Full blocks: no mask arithmetic at all. Then the partial ones: the mask_mod, and the key
    # length (the last block may be padded).
    for t in range(0, tl.load_scalar(fcnd, (row,)) * R_N):
        acc, m, l = attention_block(acc, m, l, fidd, row, t, kd, vd, qt, q_idx, scale, b, h, nk,
                                    W, BLOCK_N, MASK_N, False, SCORE_MOD, MASK_MOD)
    for t in range(0, tl.load_scalar(cnd, (row,)) * R_N):
        acc, m, l = attention_block(acc, m, l, idd, row, t, kd, vd, qt, q_idx, scale, b, h, nk,
                                    W, BLOCK_N, MASK_N, True, SCORE_MOD, MASK_MOD)

    # Rows that saw no key: 0 and LSE −inf.
    den = tl.where(l == 0.0, 1.0, l)
    tl.store(od, (m0, 0), (acc / den[:, None]).to(qt.dtype))
    tl.store(ld, (m0,), (m + tl.log2(l)) * 0.6931471805599453)


@jit(options=ALIGNED_INPUTS)
def block_sparse_attention_kernel(q, k, v, o, lse_out, kv_num, kv_idx_in, full_num, full_idx_in,
                                  tiles, starts, nq, nk, H, HKV, scale, bm_sb, bm_sh, n_rows,
                                  n_bh,
                                  D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                  MASK_M: tl.constexpr, MASK_N: tl.constexpr,
                                  SCORE_MOD: tl.constexpr, MASK_MOD: tl.constexpr,
                                  PERSISTENT: tl.constexpr, DB: tl.constexpr = 0):
    # The last query blocks first: under the usual masks (causal, documents, prefix-LM) they
    # visit the most key blocks, as causal rows do in attention_kernel.
    n_blocks = tl.cdiv(nq, BLOCK_M)
    if PERSISTENT:
        # Persistent (grid.persistent_programs): program p computes the tiles
        # tiles[starts[p]:starts[p + 1]] (BlockMask.schedule), tile bh · n_blocks + i being the
        # program (i, bh) of a launch of one program a tile.
        td, first, end = program_tiles(tiles, starts, n_blocks * n_bh)
        for t in range(first, end):
            tile = tl.load_scalar(td, (t,))
            block_sparse_tile(q, k, v, o, lse_out, kv_num, kv_idx_in, full_num, full_idx_in,
                              n_blocks - 1 - tile % n_blocks, tile // n_blocks, nq, nk, H, HKV,
                              scale, bm_sb, bm_sh, n_rows, D, BLOCK_M, BLOCK_N, MASK_M, MASK_N,
                              SCORE_MOD, MASK_MOD, DB)
    else:
        pid_m, bh = block_and_row(n_blocks)
        block_sparse_tile(q, k, v, o, lse_out, kv_num, kv_idx_in, full_num, full_idx_in,
                          n_blocks - 1 - pid_m, bh, nq, nk, H, HKV, scale, bm_sb, bm_sh, n_rows,
                          D, BLOCK_M, BLOCK_N, MASK_M, MASK_N, SCORE_MOD, MASK_MOD, DB)


class BlockMask:
    """The block sparsity of a mask_mod, made by :func:`tessel.block_mask`.

    Attributes:
        kv_num_blocks: int32 ``[B', H', NQB]``, the partial blocks of each query block (the
            mask_mod is applied there).
        kv_indices: int32 ``[B', H', NQB, NKB]``, their key-block indices in ascending order
            (the tail past ``kv_num_blocks`` is 0).
        full_kv_num_blocks: int32 ``[B', H', NQB]``, the full blocks (every pair allowed: run
            without any mask).
        full_kv_indices: int32 ``[B', H', NQB, NKB]``, their key-block indices.
        shape: ``(B, H, Nq, Nk)`` as given (B or H None: broadcast over batches / heads).
        BLOCK_M: the query block size.
        BLOCK_N: the key block size.
        mask_mod: the function it was made from.
        off_causal: int32 ``[B', H', NQB]``, the key blocks of each query block where some
            pair's verdict differs from causal's ``q_idx >= kv_idx`` (None where unknown): see
            ``is_causal``.

    ``B' = B or 1``, ``H' = H or 1``, ``NQB = ceil(Nq / BLOCK_M)``, ``NKB = ceil(Nk /
    BLOCK_N)``. numpy arrays (interpreter) or CUDA torch tensors (GPU), as made.
    """

    def __init__(self, kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices, shape,
                 BLOCK_M, BLOCK_N, mask_mod, off_causal=None):
        self.kv_num_blocks = kv_num_blocks
        self.kv_indices = kv_indices
        self.full_kv_num_blocks = full_kv_num_blocks
        self.full_kv_indices = full_kv_indices
        self.shape = tuple(shape)
        self.BLOCK_M = BLOCK_M
        self.BLOCK_N = BLOCK_N
        self.mask_mod = mask_mod
        self.off_causal = off_causal
        # The captured values the mask_mod read when the lists were made (check_block_mask);
        # weak references to its tensors, not the tensors.
        state = _capture_state(mask_mod)
        self._made_from = state and state[:2]
        _LIVE[_lists_key(lists_of(self))] = self

    @property
    def is_causal(self):
        """Whether the mask is causal attention's, with as many queries as keys and the
        mask_mod allowing exactly the pairs ``q_idx >= kv_idx`` wherever it was evaluated.

        tessel.attention then runs its dense causal kernel (no block lists, no mask_mod), so
        FlexAttention's causal mask_mod runs at the dense kernel's speed. Read once (one copy
        to the host) and kept."""
        if "_is_causal" not in self.__dict__:
            off = self.off_causal
            self._is_causal = off is not None and self.shape[2] == self.shape[3] and \
                not int((off.sum() if self.on_gpu else np.sum(off)))
        return self._is_causal

    @property
    def on_gpu(self):
        """Whether it holds CUDA torch tensors (else numpy arrays, for the interpreter)."""
        return gpu.is_torch_tensor(self.kv_num_blocks)

    def schedule(self, B, H, BLOCK_M, programs):
        """(tiles, starts) of a persistent launch of `programs` programs with query blocks
        BLOCK_M (dividing the mask's) over B batches and H heads (grid.greedy_schedule): tile
        ``bh · NB + i`` is query block NB − 1 − i of row bh, NB = ceil(Nq / BLOCK_M), and costs
        its full key blocks, 1.5 a partial one (its mask arithmetic) and 1 (its prologue and
        epilogue). int32 on the mask's device; computed once per (B, H, BLOCK_M, programs)
        from the counts (one copy to the host) and kept."""
        key = (B, H, BLOCK_M, programs)
        cache = self.__dict__.setdefault("_schedules", {})
        if key not in cache:
            nbh, nqb = self.kv_num_blocks.shape[1], self.kv_num_blocks.shape[2]
            r_m = self.BLOCK_M // BLOCK_M
            nb = -(-self.shape[2] // BLOCK_M)
            sb = nbh * nqb if self.shape[0] is not None else 0
            sh = nqb if self.shape[1] is not None else 0
            b, h, i = np.meshgrid(np.arange(B), np.arange(H), np.arange(nb), indexing="ij")
            rows = (b * sb + h * sh + (nb - 1 - i) // r_m).reshape(-1)
            full, part = (np.asarray(x.cpu() if self.on_gpu else x).reshape(-1)
                          for x in (self.full_kv_num_blocks, self.kv_num_blocks))
            costs = (full[rows] + 1.5 * part[rows]) * (BLOCK_M / self.BLOCK_M) + 1.0
            tiles, starts = greedy_schedule(costs, programs)
            if self.on_gpu:
                torch = gpu.torch_module()
                dev = self.kv_num_blocks.device
                tiles, starts = torch.from_numpy(tiles).to(dev), torch.from_numpy(starts).to(dev)
            cache[key] = (tiles, starts, float(np.mean(full[rows] + part[rows])))
        return cache[key][:2]

    def mean_blocks(self, B, H, BLOCK_M, programs):
        """The mask blocks (BLOCK_N keys) a tile of that persistent launch visits on average
        (counted with :meth:`schedule`'s and kept beside it)."""
        self.schedule(B, H, BLOCK_M, programs)
        return self._schedules[(B, H, BLOCK_M, programs)][2]

    def sparsity(self):
        """The fraction of (query block, key block) pairs that are empty (never visited)."""
        total = self.kv_indices.shape[-1] * int(np.prod(self.kv_num_blocks.shape))
        seen = int(self.kv_num_blocks.sum()) + int(self.full_kv_num_blocks.sum())
        return 1.0 - seen / total if total else 0.0

    def __repr__(self):
        B, H, Nq, Nk = self.shape
        return (f"BlockMask(B={B}, H={H}, Nq={Nq}, Nk={Nk}, BLOCK_M={self.BLOCK_M}, "
                f"BLOCK_N={self.BLOCK_N}, sparsity={self.sparsity():.2f})")


# Block masks alive, by the addresses and shapes of their lists: a compiled graph hands tessel's
# op the lists, not the BlockMask (torch_op_defs), and the op finds the mask again here, with its
# checks and what it keeps (schedules, is_causal).
_LIVE = weakref.WeakValueDictionary()


def lists_of(bm):
    """A BlockMask's lists as a compiled graph passes them: the four, then off_causal if known."""
    return [bm.kv_num_blocks, bm.kv_indices, bm.full_kv_num_blocks, bm.full_kv_indices] + \
        ([] if bm.off_causal is None else [bm.off_causal])


def _lists_key(lists):
    return tuple((x.ctypes.data if isinstance(x, np.ndarray) else x.data_ptr(), tuple(x.shape))
                 for x in lists)


def live_block_mask(lists):
    """The BlockMask alive whose lists these are (the same memory and shapes: numpy arrays or
    the tensors a graph made of them), or None; None for empty lists (no memory to tell them
    apart by)."""
    if any(x.size == 0 if isinstance(x, np.ndarray) else x.numel() == 0 for x in lists):
        return None
    return _LIVE.get(_lists_key(lists))


# The pairs block_state_kernel looks at a time on the GPU: 8 a thread in registers, and a
# [1, EVAL] tile the reference lowering (where a mask_mod leaves the register path) still holds
# in shared memory. The interpreter looks at a whole block at once.
EVAL_PAIRS = 1024


def _placement(device, like):
    """None for numpy (interpreter), else the torch device of CUDA tensors."""
    if like is not None:
        if device is not None:
            raise ValueError("tessel.block_mask: pass device or like, not both")
        if isinstance(like, np.ndarray):
            return None
        if gpu.is_torch_tensor(like):
            if cpu_tensors.is_cpu_tensor(like):     # runs on the interpreter
                return None
            if not like.is_cuda:
                raise TypeError(f"tessel.block_mask: like is on {like.device}; pass a numpy "
                                "array or a CPU tensor (interpreter) or a CUDA tensor (GPU)")
            return like.device
        raise TypeError(f"tessel.block_mask: like must be a numpy array or a torch tensor, "
                        f"got {type(like).__name__}")
    if device is None or str(device) in ("cpu", "interpreter", "numpy"):
        return None
    torch = gpu.torch_module()
    if torch is None:         # tessel never imports torch itself: a CUDA mask's tensors need it
        raise TypeError(f"tessel.block_mask: device {device!r} makes torch tensors: import "
                        "torch first (or device=None: numpy arrays, the interpreter)")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        dev = None
    if dev is None or dev.type != "cuda":
        raise TypeError(f"tessel.block_mask: device {device!r}: numpy (device=None) runs on the "
                        "interpreter, 'cuda' on the GPU")
    return dev


def _dim(name, x, allow_none):
    if x is None and allow_none:
        return None
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)) or x < 0:
        raise ValueError(f"tessel.block_mask: {name} must be a non-negative int"
                         f"{' or None' if allow_none else ''}, got {x!r}")
    return int(x)


def block_mask(mask_mod, B, H, Nq, Nk, BLOCK_M=None, BLOCK_N=None, device=None, like=None):
    """The block sparsity of ``mask_mod``, for :func:`tessel.attention`'s ``block_mask``.

    Runs a DSL program that evaluates ``mask_mod`` on every (query block, key block) tile and
    classifies it empty (skipped), full (run without mask arithmetic) or partial (the mask is
    applied), keeping compact per-row lists of the partial and full key blocks
    (FlexAttention's ``create_block_mask`` layout).

    Args:
        mask_mod: ``(b, h, q_idx, kv_idx) -> bool tile``, as for :func:`tessel.attention`; it
            may read captured tensors (numpy arrays here need ``device=None``, CUDA tensors a
            CUDA device).
        B: the batch size, or None: the mask does not depend on ``b`` (evaluated at ``b = 0``).
        H: the number of query heads, or None likewise (``h = 0``).
        Nq: the number of queries.
        Nk: the number of keys.
        BLOCK_M: the query block size, a power of two >= 16; default 64 on the interpreter, 32
            on the GPU (blocks the reference lowering holds at every head dim up to 128).
        BLOCK_N: the key block size, likewise.
        device: None (numpy arrays, the CPU interpreter) or a CUDA device (torch tensors, the
            GPU).
        like: instead of ``device``, an array or tensor whose placement to take (q).

    Returns:
        BlockMask

    Raises:
        ValueError: bad sizes or block sizes.
        TypeError: a device that is neither.
        tessel.CompilationError: a mask_mod that does not compile or returns no booleans.
    """
    place = _placement(device, like)
    B_, H_ = _dim("B", B, True), _dim("H", H, True)
    Nq, Nk = _dim("Nq", Nq, False), _dim("Nk", Nk, False)
    default = 64 if place is None else 128
    BM = default if BLOCK_M is None else BLOCK_M
    BN = default if BLOCK_N is None else BLOCK_N
    for name, x in (("BLOCK_M", BM), ("BLOCK_N", BN)):
        if not is_mask_block(x):
            raise ValueError(f"tessel.block_mask: {name} must be a power of two >= 16, got {x!r}")
    if mask_mod is None or not callable(mask_mod):
        raise TypeError("tessel.block_mask: mask_mod must be a function (b, h, q_idx, kv_idx)")
    return _classified(mask_mod, B_, H_, Nq, Nk, BM, BN, place)


def is_mask_block(x):
    """Whether x is a block size a BlockMask takes: a power of two >= 16."""
    return isinstance(x, int) and x >= 16 and not x & (x - 1)


def _classified(mask_mod, B_, H_, Nq, Nk, BM, BN, place, causal=False):
    """block_mask's BlockMask from checked arguments. `causal`: the mask has q_idx >= kv_idx
    folded in (auto_block_mask's _and_causal), so the key blocks past each query block's
    diagonal are empty without looking: half the pairs of a square mask."""
    from .attention import _as_jit
    nb, nh = B_ or 1, H_ or 1
    if B_ == 0 or H_ == 0:
        nb, nh = B_ if B_ is not None else 1, H_ if H_ is not None else 1
    nqb, nkb = -(-Nq // BM), -(-Nk // BN)
    rows = nb * nh * nqb
    if place is None:
        state = np.zeros((nb, nh, nqb, nkb), np.int32)
    else:
        torch = gpu.torch_module()
        state = torch.zeros((nb, nh, nqb, nkb), dtype=torch.int32, device=place)
    if rows and nkb:
        block_state_kernel[fold_grid(nqb, nb * nh)](
            state, Nq, Nk, nh, rows, BLOCK_M=BM, BLOCK_N=BN,
            EVAL=BM * BN if place is None else min(BM * BN, EVAL_PAIRS),
            MASK_MOD=_as_jit(mask_mod, "mask_mod"), CAUSAL=causal)
    (part, part_idx), (full, full_idx) = (block_lists(state & 3 == kind) for kind in (1, 2))
    off = ((state & 4) != 0).sum(-1)
    off = off.astype(np.int32) if place is None else off.to(torch.int32)
    return BlockMask(part, part_idx, full, full_idx, (B_, H_, Nq, Nk), BM, BN, mask_mod,
                     off_causal=off)


def _same_mod(a, b):
    """Whether two mask_mods are the same function: the same object, or the same code and
    globals with identical closure values (a tensor must be the very same object: a block mask
    made from other document ids does not fit); a mod bound to its function is that function."""
    a, b = (getattr(x, "user_fn", None) or x for x in (a, b))
    if a is b:
        return True
    try:
        if a.__code__ is not b.__code__ or a.__globals__ is not b.__globals__:
            return False
        ca, cb = a.__closure__ or (), b.__closure__ or ()
        if len(ca) != len(cb):
            return False
        # Cell by cell as the cache keys see them (_value_key): tensors by identity, lists by
        # their items (a list of tensors compared with == would ask a tensor for its truth).
        return all(x.cell_contents is y.cell_contents or
                   _value_key(x.cell_contents) == _value_key(y.cell_contents)
                   for x, y in zip(ca, cb))
    except (AttributeError, ValueError, TypeError):
        return False


def runs_as_causal(bm, block_m, block_n):
    """Whether a call with block mask `bm` runs tessel.attention's dense causal kernel instead
    of the block-sparse one: the mask is causal's (BlockMask.is_causal) and no kernel blocks
    were asked for. The dense kernel skips the same blocks without reading lists, and a
    score_mod rides along unchanged. The caller still checks that `bm` fits the call
    (check_block_mask), as the block-sparse path does."""
    return isinstance(bm, BlockMask) and block_m is None and block_n is None and bm.is_causal


def check_block_mask(bm, mask_mod, B, H, Nq, Nk, on_gpu, causal, block_m, block_n):
    """ValueError unless `bm` fits this attention call."""
    if not isinstance(bm, BlockMask):
        raise TypeError(f"block_mask must be a tessel.BlockMask (tessel.block_mask(...)), got "
                        f"{type(bm).__name__}")
    if causal:
        raise ValueError("tessel.attention: causal=True cannot be combined with a block_mask: "
                         "put the causal condition in the mask_mod (q_idx >= kv_idx) and build "
                         "the block mask from it")
    if mask_mod is None:
        raise ValueError("tessel.attention: a block_mask needs the mask_mod it was made from "
                         "(mask_mod=...)")
    if not _same_mod(bm.mask_mod, mask_mod):
        raise ValueError("tessel.attention: the block_mask was made from another mask_mod "
                         f"({getattr(bm.mask_mod, '__name__', bm.mask_mod)!r}) than the one "
                         f"passed ({getattr(mask_mod, '__name__', mask_mod)!r}), or from other "
                         "captured tensors: build it with tessel.block_mask(mask_mod, ...)")
    if not _same_state(bm._made_from, _capture_state(mask_mod)):
        raise ValueError("tessel.attention: the tensors the mask_mod reads are not those the "
                         "block_mask was made from (another tensor in their place, or one "
                         "written in place since): build it again with "
                         "tessel.block_mask(mask_mod, ...)")
    bB, bH, bNq, bNk = bm.shape
    if (bNq, bNk) != (Nq, Nk):
        raise ValueError(f"tessel.attention: the block_mask is for Nq={bNq}, Nk={bNk}; q and k "
                         f"have Nq={Nq}, Nk={Nk}")
    if bB is not None and bB != B:
        raise ValueError(f"tessel.attention: the block_mask is for B={bB}, q has B={B} (B=None "
                         "broadcasts)")
    if bH is not None and bH != H:
        raise ValueError(f"tessel.attention: the block_mask is for H={bH}, q has H={H} (H=None "
                         "broadcasts)")
    for name, x, whole in (("block_m", block_m, bm.BLOCK_M), ("block_n", block_n, bm.BLOCK_N)):
        if x and (not isinstance(x, int) or x < 16 or x & (x - 1) or whole % x):
            raise ValueError(f"tessel.attention: {name}={x!r} must be a power of two >= 16 that "
                             f"divides the block_mask's block ({bm.BLOCK_M}x{bm.BLOCK_N})")
    if bm.on_gpu != on_gpu:
        raise ValueError("tessel.attention: the block_mask holds "
                         f"{'CUDA tensors' if bm.on_gpu else 'numpy arrays'} but q is "
                         f"{'a CUDA tensor' if on_gpu else 'a numpy array'}: build it with "
                         "like=q")


# Where the block-sparse kernel's best blocks differ from tessel.attention's: d128 on the H200
# (docs/bench/2026-12-02-h200-block-mask.md: 128x128, two warpgroups, beat 64x64 on four of five
# masks).
SPARSE_GPU_BLOCKS = {("sm_90a", 128): (128, 128)}


def kernel_blocks(bm, q, D, block_m, block_n):
    """The attention kernel's (BLOCK_M, BLOCK_N) under block mask `bm`: block_m/block_n when
    given, else on the GPU tessel.attention's own blocks for this head dim, dtype and chip (the
    fast paths' shapes), and on the interpreter the mask's; never larger than the mask's blocks,
    which they divide (both are powers of two)."""
    if gpu.is_torch_tensor(q):
        from .attention import _FAST_DTYPES, _chip_for_blocks, gpu_blocks
        Nq, Nk = bm.shape[2], bm.shape[3]
        dtype, chip = gpu.torch_dtype_name(q), _chip_for_blocks(q)
        best = SPARSE_GPU_BLOCKS.get((chip, D)) if dtype in _FAST_DTYPES else None
        dm, dn = best or gpu_blocks(D, dtype, Nq, Nk, chip, mods=True)   # the mask_mod
    else:
        dm, dn = bm.BLOCK_M, bm.BLOCK_N
    return (block_m or min(dm, bm.BLOCK_M)), (block_n or min(dn, bm.BLOCK_N))


def prepare(q, k, v, scale, score_mod, mask_mod, enable_gqa, bm, block_m, block_n, causal,
            block_dim=None):
    """(args, constexprs, grid, o, lse) of block_sparse_attention_kernel for this call;
    `block_dim`: the blocks' head dim where it is not q's (the kernel's DB)."""
    from .attention import _as_jit, _check_shapes, _chip_for_blocks, softmax_scale
    on_gpu = gpu.is_torch_tensor(q)
    if on_gpu:
        torch = gpu.torch_module()
        for name, x in (("k", k), ("v", v)):
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"q is a torch tensor, {name} a {type(x).__name__}")
        if not q.is_cuda:
            raise TypeError(f"q is on {q.device}: tessel.attention runs CUDA tensors on the GPU "
                            "and numpy arrays on the CPU interpreter")
    else:
        for name, x in (("q", q), ("k", k), ("v", v)):
            if not isinstance(x, np.ndarray):
                raise TypeError(f"{name} must be a numpy array (interpreter) or a CUDA torch "
                                f"tensor (GPU), got {type(x).__name__}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v differ in dtype: {q.dtype}, {k.dtype}, {v.dtype}")
    B, H, Nq, D, Hkv, Nk = _check_shapes(q.shape, k.shape, v.shape, enable_gqa)
    check_block_mask(bm, mask_mod, B, H, Nq, Nk, on_gpu, causal, block_m, block_n)
    scale = softmax_scale(scale, D)
    BM, BN = kernel_blocks(bm, q, block_dim or D, block_m, block_n)
    nqb = bm.kv_num_blocks.shape[2]
    nbh = bm.kv_num_blocks.shape[1]
    sb = nbh * nqb if bm.shape[0] is not None else 0
    sh = nqb if bm.shape[1] is not None else 0
    rows = int(np.prod(bm.kv_num_blocks.shape))
    if on_gpu:
        q, k, v = (contiguous_aligned(x) for x in (q, k, v))
        o = torch.empty_like(q)
        lse = torch.empty((B, H, Nq), dtype=torch.float32, device=q.device)
    else:
        q, k, v = (np.ascontiguousarray(x) for x in (q, k, v))
        o = np.zeros_like(q)
        lse = np.zeros((B, H, Nq), dtype=np.float32)
    programs = persistent_programs(q, _chip_for_blocks(q), BM, BN, -(-Nq // BM) * B * H) \
        if on_gpu else 0
    # The persistent launch's schedule; else unread (any int32 arrays will do).
    tiles, starts = bm.schedule(B, H, BM, programs) if programs else \
        (bm.kv_num_blocks, bm.kv_num_blocks)
    args = (q, k, v, o, lse, bm.kv_num_blocks, bm.kv_indices, bm.full_kv_num_blocks,
            bm.full_kv_indices, tiles, starts, Nq, Nk, H, Hkv, scale, sb, sh, rows, B * H)
    constexprs = dict(D=D, BLOCK_M=BM, BLOCK_N=BN, MASK_M=bm.BLOCK_M, MASK_N=bm.BLOCK_N,
                      SCORE_MOD=_as_jit(score_mod, "score_mod"),
                      MASK_MOD=_as_jit(mask_mod, "mask_mod"), PERSISTENT=programs > 0,
                      **({"DB": block_dim} if block_dim else {}))
    grid = (programs, 1, 1) if programs else fold_grid(-(-Nq // BM), B * H)
    return args, constexprs, grid, o, lse


# The persistent kernel whose producer copies Q too (grid.short_tiles).
_block_sparse_variants = {}
_block_sparse_once = with_switches(block_sparse_attention_kernel, {"producer_once": True},
                                   _block_sparse_variants)


def kernel_of(bm, args, constexprs, grid):
    """block_sparse_attention_kernel, or its variant copying Q from the producer where the
    persistent launch's tiles visit few key blocks (grid.short_tiles), for prepare's results."""
    if constexprs["PERSISTENT"]:
        B, H = args[0].shape[0], args[0].shape[1]
        blocks = bm.mean_blocks(B, H, constexprs["BLOCK_M"], grid[0]) * \
            (bm.BLOCK_N // constexprs["BLOCK_N"])      # in the kernel's key blocks
        D = constexprs.get("DB") or constexprs["D"]             # the blocks' head dim
        switches = schedule_switches(short_tiles(blocks, D),
                                     constexprs["BLOCK_M"])
        return with_switches(block_sparse_attention_kernel, switches, _block_sparse_variants)
    return block_sparse_attention_kernel


def attention(q, k, v, scale, score_mod, mask_mod, enable_gqa, return_lse, bm, block_m,
              block_n, causal, grad=True, deterministic=False, block_dim=None):
    """tessel.attention with a block_mask (numpy: interpreter; CUDA tensors: GPU). CUDA inputs
    that require grad go through backward.attention_with_grad (`grad=False`: its forward).
    `block_dim`: the blocks' head dim where it is not q's (the kernel's DB)."""
    if grad and gpu.is_torch_tensor(q):
        if any(getattr(x, "requires_grad", False) for x in (q, k, v)) and \
                gpu.torch_module().is_grad_enabled():
            # Differentiable: the block-sparse forward inside the autograd Function.
            check_block_mask(bm, mask_mod, q.shape[0], q.shape[1], q.shape[2], k.shape[2],
                             True, causal, block_m, block_n)
            from .backward import attention_with_grad
            return attention_with_grad(q, k, v, False, scale, score_mod, mask_mod, enable_gqa,
                                       return_lse, None, None, block_mask=bm,
                                       deterministic=deterministic, block_dim=block_dim or 0)
    args, constexprs, grid, o, lse = prepare(q, k, v, scale, score_mod, mask_mod, enable_gqa,
                                             bm, block_m, block_n, causal, block_dim)
    if grid[0] and grid[1] and q.shape[2] and k.shape[2]:
        kernel_of(bm, args, constexprs, grid)[grid](*args, **constexprs)
    elif grid[0] and grid[1]:
        # No keys: every row sees nothing.
        lse[...] = float("-inf")
        o[...] = 0
    return (o, lse) if return_lse else o


# --- automatic block masks -------------------------------------------------------------------
#
# tessel.attention on CUDA tensors with a mask_mod that reads captured tensors (which the
# compile-time mask analysis never classifies) and no block_mask builds one itself and keeps it
# per (mask_mod's code and captured values, causal, shapes, device): a captured tensor counts by
# identity and version (torch bumps `_version` on every in-place write), so new document ids,
# or the same tensor written in place, make a new block mask. Identity is not enough alone: a
# training loop's new id tensor of each step may get the Python id and the device address of a
# freed one, at version 0 as it had (CUDA's caching allocator hands back the same block), so an
# entry keeps weak references to the tensors of its key and a hit whose tensors are not those
# of the call is a miss (_same_tensors).

_AUTO_MAX = 16
# key -> (BlockMask, its mask_mod, a _reference to each tensor of the key); oldest first
_auto_masks = {}


def _value_key(v, depth=0, tensors=None, handed=False):
    """What identifies a captured value for the cache: tensors by identity, version, address and
    shape (each appended to `tensors` where given); functions by their code and their own
    captures; lists, tuples and dicts by their items (one written in place is another key);
    other values by value or identity. `handed`: _captures_key's."""
    if capture.is_tensor(v):
        if tensors is not None:
            tensors.append(v)
        if gpu.is_torch_tensor(v):
            ptr = v.data_ptr() if hasattr(v, "data_ptr") else None
            return ("tensor", id(v), getattr(v, "_version", None), ptr, tuple(v.shape),
                    str(v.dtype))
        return ("array", id(v), tuple(v.shape), str(v.dtype))
    fn = getattr(v, "user_fn", None) or v
    code = getattr(fn, "__code__", None)
    if code is not None:
        return ("fn", code, _captures_key(fn, depth + 1, tensors, handed)) if depth < 4 else \
            ("fn", id(fn))
    if isinstance(v, (list, tuple)) and depth < 4 and len(v) <= 256:
        return ("items", type(v), tuple(_value_key(x, depth + 1, tensors, handed) for x in v))
    if isinstance(v, dict) and depth < 4 and len(v) <= 256:
        return ("dict", tuple((_value_key(n, depth + 1),
                               _value_key(x, depth + 1, tensors, handed)) for n, x in v.items()))
    try:
        hash(v)
        return ("value", v)
    except TypeError:
        return ("id", id(v))


def _captures_key(fn, depth=0, tensors=None, handed=False):
    """The values `fn` reads from its closure and its module's globals, as _value_key sees them
    (globals only where they are tensors or functions: a module's other names do not matter);
    the tensors among them appended to `tensors` where given. `handed`: without the global
    tensors torch.compile's op hands the kernels as inputs (torch_mods._global_tensors)."""
    cells = tuple(_value_key(c.cell_contents, depth, tensors, handed)
                  for c in (fn.__closure__ or ()))
    glob = getattr(fn, "__globals__", {})
    skip = {n for n, _ in getattr(fn, "_tessel_globals", ())} if handed else ()
    named = tuple((n, _value_key(glob[n], depth, tensors, handed)) for n in fn.__code__.co_names
                  if n in glob and n not in skip and
                  (capture.is_tensor(glob[n]) or callable(glob[n]))
                  and not isinstance(glob[n], type) and not hasattr(glob[n], "__path__"))
    return cells, named


def _reference(x):
    """A callable returning x: a weak reference where x takes one (the cache must not keep a
    large captured tensor alive), else a strong one (x's identity then cannot be reused)."""
    try:
        return weakref.ref(x)
    except TypeError:
        return lambda: x


def _same_tensors(refs, tensors):
    """Whether the references an entry kept (_reference) are to exactly these tensors, alive."""
    return len(refs) == len(tensors) and all(r() is t for r, t in zip(refs, tensors))


def _capture_state(mask_mod):
    """(key, references, tensors) of the values a mask_mod reads: _captures_key, a _reference to
    each tensor among them, and those tensors; None where it has no code to look at."""
    fn = getattr(mask_mod, "user_fn", None) or mask_mod
    if getattr(fn, "__code__", None) is None:
        return None
    tensors = []
    key = _captures_key(fn, tensors=tensors)
    return key, tuple(_reference(t) for t in tensors), tensors


def _same_state(made, now):
    """Whether a mask_mod reads now (_capture_state) what it read when a block mask was made
    (BlockMask._made_from): the same values, and the very same tensors at the same versions."""
    if made is None or now is None:
        return made is now
    return made[0] == now[0] and _same_tensors(made[1], now[2])


def _reads_tensors(key):
    """Whether a _captures_key holds a tensor (directly or in a function it calls)."""
    if isinstance(key, tuple):
        if key and key[0] in ("tensor", "array"):
            return True
        return any(_reads_tensors(x) for x in key)
    return False


def mask_reads_tensors(mask_mod, handed=False):
    """Whether a mask_mod (a function or a ModFunction) reads a captured tensor, which would
    make tessel.attention's CUDA call block-sparse (auto_block_mask); when in doubt (no code to
    look at), yes. `handed`: other than the global tensors torch.compile's op hands it."""
    fn = getattr(mask_mod, "user_fn", None) or mask_mod
    if getattr(fn, "__code__", None) is None:
        return True
    return _reads_tensors(_captures_key(fn, handed=handed))


def _uses_param(fn, index):
    """Whether fn's body may read its positional parameter `index` (b or h of a mask_mod); when
    in doubt, yes (a block mask per batch or head is only slower, never wrong)."""
    import dis
    code = fn.__code__
    if index >= code.co_argcount or code.co_flags & 0x0C:    # CO_VARARGS | CO_VARKEYWORDS
        return True                     # *args / **kwargs: anything may read it
    name = code.co_varnames[index]
    if name in code.co_cellvars:        # read by a nested function
        return True
    for ins in dis.get_instructions(code):
        vals = ins.argval if isinstance(ins.argval, tuple) else (ins.argval,)
        if name in vals and "STORE" not in ins.opname:
            return True                 # LOAD_FAST and its fused forms (3.13: pairs)
    return False


# Whether auto_block_mask's causal masks are classified only up to each query block's diagonal
# (block_state_kernel CAUSAL). Interpreter-checked (test_block_mask.py); on since its GPU check
# (2026-12-07, an H100: the CUDA fuzzer's forward and block-mask cases, 29/29).
CAUSAL_CLASSIFICATION = True


def _and_causal(mask_mod):
    """mask_mod with tessel.attention's causal condition (q_idx >= kv_idx) folded in: a block
    mask has no separate causal flag. The mask_mod is held as its mod (attention._as_jit): the
    same wrapper for the same mask, so its traces are reused, and a mask that reads tensors
    through another mod (flash_mods' window over the user's) is read from this call's."""
    from .attention import _as_jit
    from .frontend import ModFunction
    inner = mask_mod if isinstance(mask_mod, ModFunction) else _as_jit(mask_mod, "mask_mod")

    def causal_and(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & inner(b, h, q_idx, kv_idx)
    return causal_and


def auto_block_mask(q, k, causal, mask_mod, enable_gqa, block_dim=None):
    """(BlockMask, mask_mod to pass with it) for tessel.attention's CUDA call, or None where the
    call keeps the dense kernel: no mask_mod, a mask that reads no captured tensor (the
    compile-time analysis classifies those it can), dtypes or head dims (`block_dim` where the
    kernel's blocks are that wide) the fast paths do not take, empty inputs."""
    from .attention import _FAST_DTYPES, GPU_BLOCKS, _chip_for_blocks
    fn = getattr(mask_mod, "user_fn", None) or mask_mod
    if getattr(fn, "__code__", None) is None or len(q.shape) != 4 or len(k.shape) != 4:
        return None
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    if not (B and H and Nq and Nk) or gpu.torch_dtype_name(q) not in _FAST_DTYPES or \
            (_chip_for_blocks(q), block_dim or D) not in GPU_BLOCKS:
        return None
    captured, refs, tensors = _capture_state(fn)
    if not _reads_tensors(captured):
        return None
    key = (fn.__code__, captured, bool(causal), B, H, Nq, Nk, q.get_device())
    hit = _auto_masks.pop(key, None)
    if hit is not None and not _same_tensors(hit[2], tensors):
        hit = None                   # another tensor in a freed one's place: not its mask
    if hit is None:
        mod = _and_causal(mask_mod) if causal else mask_mod
        bB = B if _uses_param(fn, 0) else None
        bH = H if _uses_param(fn, 1) else None
        hit = (_classified(mod, bB, bH, Nq, Nk, 128, 128, _placement(None, q),
                           causal and CAUSAL_CLASSIFICATION), mod, refs)
        while len(_auto_masks) >= _AUTO_MAX:
            _auto_masks.pop(next(iter(_auto_masks)))
    _auto_masks[key] = hit           # the newest last
    return hit[:2]
