"""tessel.distributed: ring attention across processes, on torch.distributed.

Each rank of a process group holds a shard of one long sequence — q, k and v [B, H, n_r, D],
the same shards of q and of k/v — and `ring_attention` gives every rank the attention output of
its query rows against the *whole* sequence. The key/value shards travel around the ring (rank r
sends to r + 1 and receives from r - 1) with batched isend/irecv, posted before the attention on
the shard in hand so that the transfer overlaps the compute. Partial results are merged by their
log-sum-exps in float32 by a DSL program (`merge_partial` below): the same kernel runs on the
CPU interpreter and on the GPU. docs/ring.md has the semantics and the decisions.

Shards: "contiguous" (rank r holds the r-th run of the sequence) or "zigzag" (the sequence cut
in 2W chunks, rank r holds chunk r and chunk 2W - 1 - r, which balances the causal work:
`zigzag_shard` / `zigzag_unshard`). Lengths need not divide: shards may differ by a row (the
split rule of numpy.array_split); nothing is padded.

Where the work runs: CUDA tensors run tessel's GPU kernels; CPU tensors run on the CPU
interpreter, through numpy views of the same memory (cpu_tensors.to_numpy and to_torch,
zero-copy both ways; the ring merges into its float32 accumulator through them).

The backward is torch.autograd: the forward saves q, k, v, the output and the LSE; the backward
runs tessel.attention_backward for each pair of shards with the *global* output and LSE (so
P = exp(S - lse) is the slice of the whole row's softmax), keeps dQ at home and sends dK, dV
around the ring with their K, V until they reach their owner.

score_mod and mask_mod see *global* positions: each shard pair's attention runs them through a
wrapper (`_global_score_mod`, `_global_mask_mod`) that maps the kernel's local row indices to
positions in the whole sequence, with offsets read from a small captured int32 tensor, so that
every step shares one compiled kernel (`_GlobalMods`).

tessel itself never imports torch (tessel/gpu.py): this module imports it when called.
"""
import math

import numpy as np

from . import language as tl
from .cpu_tensors import to_numpy, to_torch
from .grid import block_and_row, fold_grid
from .jit import jit

__all__ = ["ring_attention", "zigzag_shard", "zigzag_unshard", "contiguous_shard",
           "split_sizes", "merge_partial"]

LAYOUTS = ("contiguous", "zigzag")


# --------------------------------------------------------------------------------------------
# The merge program
# --------------------------------------------------------------------------------------------

@jit
def merge_partial(o_acc, lse_acc, o_part, lse_part, n_acc, n_part, row0,
                  D: tl.constexpr, BLOCK_M: tl.constexpr):
    """Merges the attention of some query rows against one key block into the running result.

    o_acc [rows, n_acc, D] float32 and lse_acc [rows, n_acc] hold the result so far (lse -inf
    where nothing was seen); o_part [rows, n_part, D] (any float dtype) and lse_part
    [rows, n_part] the attention of query rows row0 .. row0 + n_part against the new keys.
    Both are softmax-weighted averages; the merged row is their average weighted by exp(lse):

        lse = log(exp(lse_acc) + exp(lse_part))
        o   = o_acc · exp(lse_acc - lse) + o_part · exp(lse_part - lse)

    computed against m = max(lse_acc, lse_part) so that nothing overflows; a row that neither
    side saw (both -inf) stays 0 with lse -inf. Updates o_acc and lse_acc in place. Grid
    (ceil(n_part / BLOCK_M), rows), folded like attention_kernel's (grid.fold_grid)."""
    pid_m, row = block_and_row(tl.cdiv(n_part, BLOCK_M))
    # The accumulator's descriptors end at row0 + n_part: the last block's rows past the part
    # are dropped by the stores instead of rewritten.
    ad = tl.make_desc(o_acc, shape=(row0 + n_part, D), strides=(D, 1), offset=row * n_acc * D)
    ald = tl.make_desc(lse_acc, shape=(row0 + n_part,), strides=(1,), offset=row * n_acc)
    pd = tl.make_desc(o_part, shape=(n_part, D), strides=(D, 1), offset=row * n_part * D)
    pld = tl.make_desc(lse_part, shape=(n_part,), strides=(1,), offset=row * n_part)
    m0 = pid_m * BLOCK_M
    a = tl.load(ad, (row0 + m0, 0), shape=(BLOCK_M, D))
    la = tl.load(ald, (row0 + m0,), shape=(BLOCK_M,), padding=float("-inf"))
    p = tl.load(pd, (m0, 0), shape=(BLOCK_M, D)).to(tl.float32)
    lp = tl.load(pld, (m0,), shape=(BLOCK_M,), padding=float("-inf"))
    m = tl.maximum(la, lp)
    m = tl.where(m == float("-inf"), 0.0, m)          # both -inf: weights exp(-inf) = 0
    wa = tl.exp(la - m)
    wp = tl.exp(lp - m)
    total = wa + wp
    inv = tl.where(total > 0.0, 1.0 / total, 0.0)
    o = a * (wa * inv)[:, None] + p * (wp * inv)[:, None]
    tl.store(ad, (row0 + m0, 0), o)
    tl.store(ald, (row0 + m0,), m + tl.log(total))    # log 0 = -inf where nothing was seen


def merge_block(D, on_gpu):
    """BLOCK_M of merge_partial: the GPU runs it on the reference lowering, which keeps its
    tiles in shared memory (about six float32 [BLOCK_M, D] tiles live)."""
    if not on_gpu:
        return 16
    return 32 if D <= 64 else 16


def _merge(o_acc, lse_acc, o_part, lse_part, row0):
    """merge_partial on kernel arrays: o_acc [B, H, n_acc, D] f32, lse_acc [B, H, n_acc],
    o_part [B, H, n_part, D], lse_part [B, H, n_part]; rows row0 .. row0 + n_part."""
    B, H, n_acc, D = o_acc.shape
    n_part = o_part.shape[2]
    if not (B * H and n_part):
        return
    on_gpu = not isinstance(o_acc, np.ndarray)
    BM = merge_block(D, on_gpu)
    merge_partial[fold_grid(-(-n_part // BM), B * H)](o_acc, lse_acc, o_part, lse_part, n_acc,
                                                       n_part, row0, D=D, BLOCK_M=BM)


# --------------------------------------------------------------------------------------------
# score_mod and mask_mod at global positions
# --------------------------------------------------------------------------------------------

# A shard pair's kernel indexes its query and key rows from 0. A shard, or the part of it one
# step attends with, is at most two runs of the sequence (a zigzag shard: its front and back
# chunks), so local row i is at global position
#
#     i + base + (jump if i >= split else 0)
#
# (one run: split = its length, jump = 0). `off` holds (base, split, jump) of the query rows,
# then of the key rows: an int32 tensor of 6 the wrappers capture. It is a kernel argument
# (docs/dsl.md, "Captured tensors"), not part of the kernel's identity: every step, every rank
# and every call runs the same compiled kernel, whatever the offsets. `user` is the user's mod
# as a ModFunction, so that it is inlined with its role's checks, located at the user's code
# exactly as tessel.attention reports them.

def _global_mask_mod(user, off):
    def global_mask_mod(b, h, q_idx, kv_idx):
        return user(b, h, q_idx + off[0] + tl.where(q_idx >= off[1], off[2], 0),
                    kv_idx + off[3] + tl.where(kv_idx >= off[4], off[5], 0))
    return global_mask_mod


def _global_score_mod(user, off):
    def global_score_mod(score, b, h, q_idx, kv_idx):
        return user(score, b, h, q_idx + off[0] + tl.where(q_idx >= off[1], off[2], 0),
                    kv_idx + off[3] + tl.where(kv_idx >= off[4], off[5], 0))
    return global_score_mod


def _pieces_in(pieces, span):
    """The parts of local rows span[0] .. span[1] of a shard made of `pieces` [(local start,
    global start, length)], as [(row counted from span[0], global start, length)]."""
    a, b = span
    parts = []
    for start, pos, n in pieces:
        lo, hi = max(a, start), min(b, start + n)
        if lo < hi:
            parts.append((lo - a, pos + lo - start, hi - lo))
    return parts


def _runs_at(pieces, span):
    """(base, split, jump) of local rows span[0] .. span[1] of a shard made of `pieces`
    [(local start, global start, length)] (at most two runs of the sequence), the rows counted
    from span[0]."""
    a, b = span
    parts = [(row, pos) for row, pos, _ in _pieces_in(pieces, span)]
    if not parts:                                    # no rows: nothing reads the offsets
        return 0, 0, 0
    base = parts[0][1]
    if len(parts) == 1:
        return base, b - a, 0
    (split, second), = parts[1:]
    return base, split, second - split - base


def _global_runs(pieces, span):
    """The global rows of local rows span[0] .. span[1] of a shard made of `pieces`, as
    [(global start, length)]."""
    return [(pos, n) for _, pos, n in _pieces_in(pieces, span)]


def window_sees(q_runs, k_runs, window):
    """Whether a query of `q_runs` sees a key of `k_runs` — [(global start, length)] each —
    through window = (left, right), FlashAttention's window_size (-1: unbounded): a key at
    kv_idx is seen from q_idx where q_idx - left <= kv_idx <= q_idx + right. The keys a run of
    queries [a, a + n) sees are [a - left, a + n - 1 + right], one interval."""
    left, right = window
    for a, n in q_runs:
        lo = a - left if left >= 0 else -math.inf
        hi = a + n - 1 + right if right >= 0 else math.inf
        if any(c <= hi and c + m - 1 >= lo for c, m in k_runs):
            return True
    return False


class _GlobalMods:
    """The user's score_mod and mask_mod (ModFunctions, or None) as one shard pair's kernel
    calls them: wrapped to see global positions, the offsets in a captured int32 tensor."""

    def __init__(self, score_mod, mask_mod):
        self.score_mod, self.mask_mod = score_mod, mask_mod

    def at(self, off):
        """(score_mod, mask_mod) for tessel.attention / attention_backward, at offsets `off`
        (int32 [6]: a numpy array on the interpreter, a CUDA tensor on the GPU)."""
        return (None if self.score_mod is None else _global_score_mod(self.score_mod, off),
                None if self.mask_mod is None else _global_mask_mod(self.mask_mod, off))

    @staticmethod
    def tensor(rows, like):
        """The offsets `rows` (lists of 6 ints) as an int32 tensor where kernels on `like`'s
        device read it: numpy on the CPU, one copy to the GPU for all of them."""
        table = np.array(rows, dtype=np.int32).reshape(len(rows), 6)
        if like.is_cuda:
            import torch
            return torch.from_numpy(table).to(like.device)
        return table


def _check_mods(q, k, v, causal, scale, enable_gqa, mods, grad):
    """Traces the kernels of the first step (every rank's own shard pair, with `causal`) before
    any communication: a mod that does not compile raises its located CompilationError on each
    rank that passes it, with no message in flight (the traces are the ones step 0 then finds
    in the cache). With gradients wanted, the backward's dQ program too: a score_mod the
    compiler cannot differentiate raises at the forward, as in tessel.attention."""
    from .attention import compile_attention
    sm, mm = mods.at(_GlobalMods.tensor([[0] * 6], q)[0])
    hq, hk, hv = to_numpy(q), to_numpy(k), to_numpy(v)
    compile_attention(hq, hk, hv, causal=causal, scale=scale, score_mod=sm, mask_mod=mm,
                      enable_gqa=enable_gqa)
    if grad and sm is not None:
        from . import gpu
        from .backward import _config, attention_bwd_dq, gpu_backward_blocks
        bm = bn = None
        if q.is_cuda:
            bm, bn = gpu_backward_blocks(q.shape[3], gpu.torch_dtype_name(q))
        shapes, sc, cx = _config(hq, hk, hv, causal, scale, sm, mm, enable_gqa, bm, bn)
        B, H, Nq, D, Hkv, Nk = shapes
        if q.is_cuda:
            import torch
            row = q.new_zeros((B, H, Nq), dtype=torch.float32)
        else:
            row = np.zeros((B, H, Nq), np.float32)
        attention_bwd_dq.warmup(hq, hk, hv, hq, row, row, hq, Nq, Nk, H, Hkv, sc, **cx)


# --------------------------------------------------------------------------------------------
# Sharding helpers
# --------------------------------------------------------------------------------------------

def split_sizes(n, parts):
    """The sizes of `parts` consecutive chunks of n rows: numpy.array_split's rule (the first
    n % parts chunks one row longer)."""
    if parts <= 0:
        raise ValueError(f"cannot split into {parts} parts")
    base, extra = divmod(n, parts)
    return [base + (i < extra) for i in range(parts)]


def _starts(sizes):
    out, at = [], 0
    for s in sizes:
        out.append(at)
        at += s
    return out


def _take(x, dim, start, stop):
    index = [slice(None)] * x.ndim
    index[dim] = slice(start, stop)
    return x[tuple(index)]


def _cat(parts, dim):
    if isinstance(parts[0], np.ndarray):
        return np.concatenate(parts, axis=dim)
    import torch
    return torch.cat(parts, dim=dim)


def _norm_dim(x, dim):
    if not -x.ndim <= dim < x.ndim:
        raise ValueError(f"dim {dim} out of range for {x.ndim} dimensions")
    return dim % x.ndim


def _check_rank(rank, world):
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"rank {rank} is not in a world of {world}")


def zigzag_shard(x, rank, world, dim=2):
    """Rank `rank`'s zigzag shard of x (a numpy array or torch tensor) along `dim` (2: the
    sequence axis of [B, H, N, D]): x cut in 2·world chunks (split_sizes), chunk `rank` followed
    by chunk 2·world - 1 - rank. Under a causal mask every rank then has the same work, up to a
    row. A new array (a copy)."""
    _check_rank(rank, world)
    dim = _norm_dim(x, dim)
    sizes = split_sizes(x.shape[dim], 2 * world)
    starts = _starts(sizes)
    a, b = rank, 2 * world - 1 - rank
    return _cat([_take(x, dim, starts[a], starts[a] + sizes[a]),
                 _take(x, dim, starts[b], starts[b] + sizes[b])], dim)


def zigzag_unshard(shards, dim=2):
    """The whole sequence from every rank's zigzag shard, in rank order (zigzag_shard's
    inverse)."""
    shards = list(shards)
    if not shards:
        raise ValueError("zigzag_unshard needs one shard per rank")
    world = len(shards)
    dim = _norm_dim(shards[0], dim)
    n = sum(s.shape[dim] for s in shards)
    sizes = split_sizes(n, 2 * world)
    front, back = [None] * world, [None] * world
    for r, s in enumerate(shards):
        a = sizes[r]
        if s.shape[dim] != a + sizes[2 * world - 1 - r]:
            raise ValueError(f"shard {r} has {s.shape[dim]} rows along dim {dim}; a zigzag "
                             f"shard of {n} rows over {world} ranks has "
                             f"{a + sizes[2 * world - 1 - r]}")
        front[r] = _take(s, dim, 0, a)
        back[world - 1 - r] = _take(s, dim, a, s.shape[dim])
    return _cat(front + back, dim)


def contiguous_shard(x, rank, world, dim=2):
    """Rank `rank`'s contiguous shard of x along `dim`: the rank-th of `world` consecutive runs
    (split_sizes). The inverse is a concatenation in rank order. A view where the array type
    gives one."""
    _check_rank(rank, world)
    dim = _norm_dim(x, dim)
    sizes = split_sizes(x.shape[dim], world)
    start = _starts(sizes)[rank]
    return _take(x, dim, start, start + sizes[rank])


# --------------------------------------------------------------------------------------------
# The ring
# --------------------------------------------------------------------------------------------

class _Ring:
    """The process group's ring as one rank sees it, and every rank's shard lengths (gathered
    once per call, so that every rank validates the same facts and raises the same error)."""

    def __init__(self, torch, dist, group, q, k, v, causal, layout, enable_gqa, mods=(0, 0),
                 window=None):
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("ring_attention needs torch.distributed initialised "
                               "(torch.distributed.init_process_group)")
        self.torch, self.dist, self.group = torch, dist, group
        self.rank = dist.get_rank(group)
        self.world = dist.get_world_size(group)
        W = self.world
        self.next = self._global((self.rank + 1) % W)
        self.prev = self._global((self.rank - 1) % W)
        B, H, Lq, D = q.shape
        Hkv, Lk = k.shape[1], k.shape[2]
        codes = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
        mine = [B, H, Hkv, D, Lq, Lk, codes.get(q.dtype, -1), int(bool(causal)),
                LAYOUTS.index(layout), int(bool(enable_gqa))] + [int(bool(m)) for m in mods]
        if W == 1:
            table = [mine]
        else:
            t = torch.tensor(mine, dtype=torch.int64, device=q.device)
            gathered = [torch.empty_like(t) for _ in range(W)]
            dist.all_gather(gathered, t, group=group)
            table = [g.tolist() for g in gathered]
        self._check(table)
        self.q_lens = [row[4] for row in table]
        self.kv_lens = [row[5] for row in table]
        self.fronts = None
        # Where each rank's rows are in the sequence, [(local start, global start, length)]:
        # what the causal mask needs of zigzag shards, and score_mod / mask_mod of any shard.
        self.q_pieces = self.kv_pieces = None
        if layout == "zigzag" and (causal or any(mods)):
            self.q_pieces = self._zigzag(self.q_lens, "")
            self.kv_pieces = self.q_pieces if causal else self._zigzag(self.kv_lens,
                                                                       " key/value")
            self.fronts = [p[0][2] for p in self.q_pieces]
        elif any(mods):
            self.q_pieces = self._contiguous(self.q_lens)
            self.kv_pieces = self._contiguous(self.kv_lens)
        # FlashAttention's window_size as (left, right), or None: shard pairs it hides whole
        # are skipped (task). It comes with its mask_mod, so the pieces are known.
        self.window = window if self.q_pieces is not None else None

    @staticmethod
    def _contiguous(lens):
        return [[(0, start, n)] for start, n in zip(_starts(lens), lens)]

    def _zigzag(self, lens, what):
        """Each rank's two chunks; every rank raises the same ValueError for lengths that are
        not zigzag shards of their sum."""
        W, n = self.world, sum(lens)
        sizes = split_sizes(n, 2 * W)
        starts = _starts(sizes)
        bad = [r for r in range(W) if lens[r] != sizes[r] + sizes[2 * W - 1 - r]]
        if bad:
            r = bad[0]
            raise ValueError(
                f"ring_attention(layout='zigzag'): rank {r} holds {lens[r]}{what} rows of "
                f"a {n}-row sequence; its zigzag shard (tessel.distributed.zigzag_shard) "
                f"has {sizes[r] + sizes[2 * W - 1 - r]}")
        return [[(0, starts[r], sizes[r]),
                 (sizes[r], starts[2 * W - 1 - r], sizes[2 * W - 1 - r])] for r in range(W)]

    def _global(self, group_rank):
        if self.group is None:
            return group_rank
        return self.dist.get_global_rank(self.group, group_rank)

    def _check(self, table):
        names = ("batch", "query heads", "key/value heads", "head dim")
        first = table[0]
        for r, row in enumerate(table):
            for i, name in enumerate(names):
                if row[i] != first[i]:
                    raise ValueError(f"ring_attention: ranks 0 and {r} disagree on the {name} "
                                     f"({first[i]} and {row[i]})")
            if row[6] != first[6]:
                raise ValueError(f"ring_attention: ranks 0 and {r} pass different dtypes")
            if row[7:10] != first[7:10]:
                raise ValueError(f"ring_attention: ranks 0 and {r} pass different causal, "
                                 "layout or enable_gqa")
            for i, name in ((10, "score_mod"), (11, "mask_mod")):
                if row[i] != first[i]:
                    raise ValueError(f"ring_attention: rank {r if row[i] else 0} passes a "
                                     f"{name} and rank {0 if row[i] else r} does not")
            if row[7] and row[4] != row[5]:
                raise ValueError(f"ring_attention(causal=True): rank {r} holds {row[4]} query "
                                 f"rows and {row[5]} key rows; causal ring attention is "
                                 "self-attention: q, k and v must be shards of one sequence")
            if row[4] == 0 or row[5] == 0:
                raise ValueError(f"ring_attention: rank {r} holds an empty shard; use fewer "
                                 "ranks than rows")

    def source(self, step):
        """The rank whose key/value shard this rank holds at `step`."""
        return (self.rank - step) % self.world

    def task(self, src, causal):
        """(query rows, key rows, causal) of this rank's queries against src's keys, or None
        where no key is visible (causality, or a window that hides the whole pair: its kernel
        would compute nothing). Rows as (start, stop) in the local shards."""
        found = self._causal_task(src, causal)
        if found is None or self.window is None:
            return found
        qs, ks, _ = found
        return found if window_sees(_global_runs(self.q_pieces[self.rank], qs),
                                    _global_runs(self.kv_pieces[src], ks), self.window) else None

    def _causal_task(self, src, causal):
        r = self.rank
        all_q, all_k = (0, self.q_lens[r]), (0, self.kv_lens[src])
        if not causal:
            return all_q, all_k, False
        if src == r:
            # Contiguous: the diagonal block. Zigzag: the shard is [front, back] with the
            # front before the back in the sequence, so causal on the local indices is right
            # for all four pairs (front-front and back-back diagonal, back-front full,
            # front-back empty).
            return all_q, all_k, True
        if self.fronts is None:                      # contiguous: earlier shards only
            return (all_q, all_k, False) if src < r else None
        if src < r:                                  # every query sees src's front chunk
            return all_q, (0, self.fronts[src]), False
        return (self.fronts[r], self.q_lens[r]), all_k, False   # our back chunk sees it all

    def offsets(self, causal, like):
        """Per step, the offsets (_GlobalMods) of that step's shard pair as a row of one int32
        tensor (None where the step does no work)."""
        rows, used = [], []
        for step in range(self.world):
            src = self.source(step)
            task = self.task(src, causal)
            used.append(task is not None)
            if task is None:
                rows.append([0] * 6)
                continue
            qs, ks, _ = task
            rows.append(list(_runs_at(self.q_pieces[self.rank], qs))
                        + list(_runs_at(self.kv_pieces[src], ks)))
        table = _GlobalMods.tensor(rows, like)
        return [table[s] if u else None for s, u in enumerate(used)]

    def exchange(self, send, recv_shape, tag):
        """Posts the send of `send` to the next rank and the receive of a new tensor of
        recv_shape from the previous one; returns (the receive buffer, the requests)."""
        torch, dist = self.torch, self.dist
        buf = torch.empty(recv_shape, dtype=send.dtype, device=send.device)
        ops = [dist.P2POp(dist.isend, send, self.next, self.group, tag),
               dist.P2POp(dist.irecv, buf, self.prev, self.group, tag)]
        return buf, dist.batch_isend_irecv(ops)


def _wait(requests):
    for req in requests or ():
        req.wait()


def _rows(x, span):
    return x[:, :, span[0]:span[1]]


def _forward(ring, q, k, v, causal, scale, enable_gqa, mods=None):
    """The ring forward: (o like q, lse float32 [B, H, Lq]) of this rank's query rows. `mods`:
    the user's score_mod / mask_mod (_GlobalMods) or None."""
    from .attention import attention
    torch = ring.torch
    B, H, Lq, D = q.shape
    kv = torch.stack((k, v))                          # one message per step
    offsets = ring.offsets(causal, q) if mods is not None else None
    o_acc = lse_acc = None
    for step in range(ring.world):
        src = ring.source(step)
        pending, nxt = None, None
        if step + 1 < ring.world:                     # the next shard travels meanwhile
            shape = (2,) + tuple(kv.shape[1:3]) + (ring.kv_lens[ring.source(step + 1)], D)
            nxt, pending = ring.exchange(kv, shape, tag=0)
        task = ring.task(src, causal)
        if task is not None:
            qs, ks, c = task
            sm, mm = mods.at(offsets[step]) if mods is not None else (None, None)
            o_i, lse_i = attention(to_numpy(_rows(q, qs)), to_numpy(_rows(kv[0], ks)),
                                   to_numpy(_rows(kv[1], ks)), causal=c, scale=scale,
                                   score_mod=sm, mask_mod=mm, enable_gqa=enable_gqa,
                                   return_lse=True)
            if o_acc is None and qs == (0, Lq):       # the first pair, every row: no merge
                o_acc = to_torch(o_i).float()
                lse_acc = to_torch(lse_i)
            else:
                if o_acc is None:                     # a window skipped this rank's own pair
                    o_acc, lse_acc = _unseen(torch, q)
                _merge(to_numpy(o_acc), to_numpy(lse_acc), o_i, lse_i, qs[0])
        _wait(pending)
        if nxt is not None:
            kv = nxt
    if o_acc is None:                                 # a window hid every key from these rows
        o_acc, lse_acc = _unseen(torch, q)
    return o_acc.to(q.dtype), lse_acc


def _unseen(torch, q):
    """The merge's start for rows that have seen no key yet: O = 0, LSE = −inf (float32)."""
    B, H, Lq, D = q.shape
    return (torch.zeros((B, H, Lq, D), dtype=torch.float32, device=q.device),
            torch.full((B, H, Lq), -math.inf, dtype=torch.float32, device=q.device))


def _backward(ring, q, k, v, o, lse, do, dlse, causal, scale, enable_gqa, mods=None):
    """dq, dk, dv of this rank's shards. dK and dV of a key/value shard travel with it, one
    step behind, and arrive at their owner after the last step. The pairs, and the offsets
    of the mods, are the forward's."""
    from .backward import attention_backward
    torch = ring.torch
    D = q.shape[3]
    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    kv = torch.stack((k, v))
    offsets = ring.offsets(causal, q) if mods is not None else None
    dkv = dkv_pending = None
    for step in range(ring.world):
        src = ring.source(step)
        pending, nxt = None, None
        if step + 1 < ring.world:
            shape = (2,) + tuple(kv.shape[1:3]) + (ring.kv_lens[ring.source(step + 1)], D)
            nxt, pending = ring.exchange(kv, shape, tag=0)
        part = torch.zeros(kv.shape, dtype=torch.float32, device=kv.device)
        task = ring.task(src, causal)
        if task is not None:
            qs, ks, c = task
            sm, mm = mods.at(offsets[step]) if mods is not None else (None, None)
            hq = [to_numpy(_rows(x, qs)) for x in (q, o, do)]
            g = attention_backward(hq[0], to_numpy(_rows(kv[0], ks)), to_numpy(_rows(kv[1], ks)),
                                   hq[1], to_numpy(_rows(lse, qs)), hq[2], causal=c, scale=scale,
                                   score_mod=sm, mask_mod=mm, enable_gqa=enable_gqa,
                                   dlse=None if dlse is None else to_numpy(_rows(dlse, qs)))
            dq_i, dk_i, dv_i = (to_torch(x) for x in g)
            _rows(dq, qs).add_(dq_i)
            _rows(part[0], ks).add_(dk_i)
            _rows(part[1], ks).add_(dv_i)
        if dkv_pending is not None:                   # what the ranks before added to src's
            _wait(dkv_pending)
            part += dkv
        # src's gradients go on to the next rank, which holds src's shard at the next step;
        # after the last step the next rank is src itself.
        back_shape = (2,) + tuple(kv.shape[1:3]) + (ring.kv_lens[ring.source(step + 1)], D)
        if ring.world > 1:
            dkv, dkv_pending = ring.exchange(part, back_shape, tag=1)
        else:
            dkv = part
        _wait(pending)
        if nxt is not None:
            kv = nxt
    _wait(dkv_pending)
    return dq.to(q.dtype), dkv[0].to(k.dtype), dkv[1].to(v.dtype)


_function = None


def _autograd_function(torch):
    global _function
    if _function is not None:
        return _function

    class RingAttention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, ring, causal, scale, enable_gqa, mods):
            o, lse = _forward(ring, q, k, v, causal, scale, enable_gqa, mods)
            ctx.save_for_backward(q, k, v, o, lse)
            ctx.config = (ring, causal, scale, enable_gqa, mods)
            ctx.set_materialize_grads(False)      # an unused lse: None, not a tensor of zeros
            return o, lse

        @staticmethod
        def backward(ctx, do, dlse):
            q, k, v, o, lse = ctx.saved_tensors
            ring, causal, scale, enable_gqa, mods = ctx.config
            if do is None:
                do = torch.zeros_like(o)
            do = do.contiguous()
            if dlse is not None:
                dlse = dlse.float().contiguous()
            dq, dk, dv = _backward(ring, q, k, v, o, lse, do, dlse, causal, scale, enable_gqa,
                                   mods)
            return dq, dk, dv, None, None, None, None, None

    _function = RingAttention
    return _function


def ring_attention(q, k, v, causal=False, scale=None, group=None, *, layout="contiguous",
                   score_mod=None, mask_mod=None, enable_gqa=False, return_lse=False,
                   window_size=None, softcap=None, alibi_slopes=None):
    """Attention of this rank's query shard against the whole sequence, its key/value shards
    spread over the ranks of `group` (torch.distributed; default the world).

    q [B, H, n_r, D], k and v [B, Hkv, m_r, D]: torch tensors (CUDA: tessel's GPU kernels, the
    NCCL backend; CPU: the interpreter, the gloo backend), rank r's shard of the sequence as
    `layout` says — "contiguous" (rank r holds the r-th consecutive run; any lengths) or
    "zigzag" (zigzag_shard: chunks r and 2W - 1 - r of 2W). Semantics of tessel.attention on
    the whole sequence: scale 1/sqrt(D) by default; causal is top-left aligned on the global
    positions (then q, k and v must be shards of one sequence, the same rows on each rank);
    enable_gqa lets Hkv divide H. score_mod and mask_mod are tessel.attention's (@tessel.jit
    functions or plain functions and lambdas, FlexAttention conventions), and their q_idx and
    kv_idx are positions in the whole sequence, as for tessel.attention on it (with "zigzag",
    the shards of q and of k/v must then be zigzag shards even without causal). Returns o like
    q — rank r's rows of the whole attention, in the same shard layout — or (o, lse) with
    return_lse (lse float32 [B, H, n_r]).

    Every rank of the group must call it, with the same B, heads, D, dtype, causal, layout,
    enable_gqa and mods (checked on every rank: one small all_gather per call; that a
    score_mod / mask_mod is passed is checked, not that it is the same function).
    Differentiable: inputs that require grad (grad mode on) get dq, dk and dv through autograd,
    computed around the ring (docs/ring.md). window_size, softcap and alibi_slopes:
    tessel.attention's (FlashAttention's), at global positions (alibi_slopes float32 [H] or
    [B, H], where q is; no gradient flows into it, as in FlashAttention).
    """
    from . import torch_ops
    if torch_ops.compiling(q):
        # Under torch.compile: the ring's sends and receives are not ops Dynamo traces, so
        # the whole call runs eagerly (one graph break) rather than the graph breaking at each.
        return torch_ops.outside_graph(
            ring_attention, q, k, v, causal, scale, group, layout=layout, score_mod=score_mod,
            mask_mod=mask_mod, enable_gqa=enable_gqa, return_lse=return_lse,
            window_size=window_size, softcap=softcap, alibi_slopes=alibi_slopes)
    import torch
    import torch.distributed as dist
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"ring_attention: {name} must be a torch tensor, got "
                            f"{type(x).__name__}")
        if x.dim() != 4:
            raise ValueError(f"ring_attention: {name} must have shape [B, H, N, D], got "
                             f"{tuple(x.shape)}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v differ in dtype: {q.dtype}, {k.dtype}, {v.dtype}")
    if q.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"ring_attention takes float32, float16 or bfloat16, not {q.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k and v are on different devices: {q.device}, {k.device}, "
                         f"{v.device}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    from .attention import _check_shapes
    B, H, _, D, Hkv, _ = _check_shapes(q.shape, k.shape, v.shape, enable_gqa)
    if Hkv == 0:
        raise ValueError(f"the number of query heads ({H}) must be a multiple of the number of "
                         f"key/value heads ({Hkv})")
    from .attention import softmax_scale
    scale = softmax_scale(scale, D)
    grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    q, k, v = (x.contiguous() for x in (q, k, v))
    if window_size is not None or softcap is not None or alibi_slopes is not None:
        from .flash_mods import flash_mods
        score_mod, mask_mod = flash_mods(q, causal, window_size, softcap, alibi_slopes,
                                         score_mod, mask_mod, fn="ring_attention")
    mods = None
    if score_mod is not None or mask_mod is not None:
        from .attention import _as_jit
        mods = _GlobalMods(_as_jit(score_mod, "score_mod"), _as_jit(mask_mod, "mask_mod"))
        _check_mods(q.detach(), k.detach(), v.detach(), bool(causal), scale, bool(enable_gqa),
                    mods, grad)
    window = None
    if window_size is not None:
        from .flash_mods import _window
        window = _window(window_size)
        if window is not None and causal:
            window = (window[0], 0)                 # causal: no key after the query
    ring = _Ring(torch, dist, group, q, k, v, causal, layout, enable_gqa,
                 (score_mod is not None, mask_mod is not None), window)
    if grad:
        o, lse = _autograd_function(torch).apply(q, k, v, ring, bool(causal), scale,
                                                 bool(enable_gqa), mods)
    else:
        with torch.no_grad():
            o, lse = _forward(ring, q.detach(), k.detach(), v.detach(), bool(causal), scale,
                              bool(enable_gqa), mods)
    return (o, lse) if return_lse else o
