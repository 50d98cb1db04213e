"""Launch grids of the attention programs for any number of (batch, head) rows.

CUDA caps a grid's y and z axes at 65,535 programs (x at 2^31 - 1). The attention programs put
their query (or key) blocks on x, fastest, so that programs running at the same time share one
head's keys and values in L2, and the b·h rows on y. Past 65,535 rows, y keeps an exact divisor
Y of the row count and x takes the other factor: program (x, y) is block x % n_blocks of row
(x // n_blocks) · Y + y. Exact, so no program falls outside the rows and none needs a guard;
below the cap Y is the row count and the kernels run as before. The kernels decode it with
`block_and_row` (a @tessel.jit helper, inlined where a kernel calls it) and the AOT launcher
(aot.py) with the same rule.
"""
import functools
import heapq

import numpy as np

from . import language as tl
from .jit import jit

MAX_GRID_Y = 65535
MAX_GRID_X = 2**31 - 1


@functools.lru_cache(maxsize=256)
def rows_on_y(rows):
    """The number of rows on grid y: `rows` itself up to the cap, else its largest divisor
    that fits (1 for a prime, which then puts every row on x)."""
    if rows <= MAX_GRID_Y:
        return rows
    return next(d for d in range(MAX_GRID_Y, 0, -1) if rows % d == 0)


def fold_grid(n_blocks, rows):
    """The launch grid (x, y, 1) for `n_blocks` blocks of each of `rows` rows."""
    if n_blocks <= 0 or rows <= 0:
        return (max(n_blocks, 0), max(rows, 0), 1)
    y = rows_on_y(rows)
    x = n_blocks * (rows // y)
    if x > MAX_GRID_X:
        raise ValueError(f"{n_blocks} blocks x {rows} batch·head rows need a grid of {x} x {y} "
                         f"programs, more than CUDA's {MAX_GRID_X} along x")
    return (x, y, 1)


@jit
def block_and_row(n_blocks):
    """In a kernel launched on fold_grid(n_blocks, rows): this program's (block, row), the block
    in [0, n_blocks) and the row in [0, rows). Program (x, y) is block x % n_blocks of row
    (x // n_blocks) · Y + y, Y = num_programs(1); below the cap (x < n_blocks) the row is y."""
    return (tl.program_id(0) % n_blocks,
            tl.program_id(0) // n_blocks * tl.num_programs(1) + tl.program_id(1))


@jit
def program_tiles(tiles, starts, n_tiles):
    """In a kernel launched on a persistent schedule (greedy_schedule's `tiles` and `starts`,
    `n_tiles` in all): the descriptor of `tiles` and this program's range [first, end) of it;
    tile t of the range is `tl.load_scalar(desc, (t,))`."""
    td = tl.make_desc(tiles, shape=(n_tiles,), strides=(1,))
    sd = tl.make_desc(starts, shape=(tl.num_programs(0) + 1,), strides=(1,))
    pid = tl.program_id(0)
    return td, tl.load_scalar(sd, (pid,)), tl.load_scalar(sd, (pid + 1,))


@jit
def dense_tiles(tiles, starts, n_tiles, CAUSAL: tl.constexpr):
    """A dense persistent kernel's tiles: (td, first, end, step), its tiles being
    tile_block(td, t, ..., CAUSAL) for t in range(first, end, step). Causal: this program's
    range of the schedule (program_tiles). Otherwise every tile costs the same and
    greedy_schedule deals them round-robin in launch order: tiles p, p + P, ... of P programs,
    counted without reading the schedule (a load the tile head would wait for)."""
    td = tl.make_desc(tiles, shape=(n_tiles,), strides=(1,))
    first, end, step = tl.program_id(0), n_tiles, tl.num_programs(0)
    if CAUSAL:
        td, first, end = program_tiles(tiles, starts, n_tiles)
        step = 1
    return td, first, end, step


@jit
def tile_block(td, t, n_blocks, CAUSAL: tl.constexpr):
    """Tile t of a dense persistent program (dense_tiles): its (query block, b·h row), tile
    bh · n_blocks + i being block i of row bh. Causal: tile t is the schedule's entry t, and
    block n_blocks − 1 − i (the longest rows first)."""
    tile = t
    if CAUSAL:
        tile = tl.load_scalar(td, (t,))
    pid_m = tile % n_blocks
    if CAUSAL:
        pid_m = n_blocks - 1 - pid_m
    return pid_m, tile // n_blocks


# --- persistent kernels ----------------------------------------------------------------------
#
# A persistent kernel is launched on one program an SM; each program walks its list of the
# (query block, b·h row) tiles (greedy_schedule; its loop is the tile loop of
# docs/dev/codegen-wgmma.md, "Persistent kernels"). Where the kernel is warp-specialized, its
# producer then copies the next tile's first blocks while the consumers finish one: short rows
# no longer pay a CTA's launch and prologue each.

#: The (chip, BLOCK_M, BLOCK_N) of the kernels that run persistent: the warp-specialized
#: 128- and 192-row wgmma blocks (one CTA an SM).
PERSISTENT_BLOCKS = {("sm_90a", 128, 128), ("sm_90a", 192, 128)}
#: Those that run persistent when causal only: d256's 128x64 (H200, 2026-12-05, two rounds
#: beside cuDNN: causal +3 to +6 % at 4k keys, +0.5 to +1 % at 16k; non-causal 4 to 8 % slower;
#: docs/bench/2026-12-05-h200-s31.md).
PERSISTENT_CAUSAL_BLOCKS = {("sm_90a", 128, 64)}
#: False runs every kernel one program a tile (to compare).
PERSISTENT_GPU = True


#: Persistent kernels whose tiles visit at most this many key blocks on average (a tile's
#: prologue and epilogue weigh most) have their producer copy Q too, into two buffers
#: (GpuOptions.producer_once, tilegpu-producer-once): the next tile's Q lands while this one
#: runs. Measured on the H200 (docs/bench/2026-12-04-h200-producer-q.md): +5 % at 1k keys,
#: +2 % at 2k, +6.5 % on a document mask (~9 blocks a tile); flat to −4 % on long causal rows.
PRODUCER_ONCE_MAX_BLOCKS = 16
#: Nor above this head dim: Q's second buffer leaves d256's 128x64 kernel too few registers
#: (204 bytes of spill, 0 without it).
PRODUCER_ONCE_MAX_D = 128
#: False: never (to compare).
PRODUCER_ONCE_GPU = True


#: Persistent kernels whose producer copies Q (short tiles; the dense and block-sparse fp16 and
#: bf16 kernels, not FP8's yet) issue each tile's first Q·Kᵀ before the previous tile's
#: epilogue (GpuOptions.pipeline_tiles, tilegpu-pipeline-tiles; the same arithmetic). Off until
#: measured on the H200 (bench/results/2026-12-05-h200-s26/run1.sh).
PIPELINE_TILES_GPU = False
#: The 192-row kernels (d64's three consumer warpgroups) run overlapped with P made after the
#: previous P·V's wait, beside a cp.async producer (GpuOptions.late_p with tma_producer off:
#: FlashAttention-3's d64 schedule). Off until measured (the same folder's run2.sh).
LATE_P_GPU = False
#: FP8 kernels run their consumers overlapped as fp16's are (GpuOptions.fp8_overlap). Off until
#: measured (bench/results/2026-12-05-h200-s26/run3.sh).
FP8_OVERLAP_GPU = False


def schedule_switches(short, block_m):
    """The CompileOptions switches of a persistent launch: Q from the producer where its tiles
    are `short` (short_tiles), pipelined tiles with it (PIPELINE_TILES_GPU), FA3's d64 schedule
    for `block_m` 192 (LATE_P_GPU); {} for the kernel's defaults."""
    switches = {}
    if short:
        switches["producer_once"] = True
        if PIPELINE_TILES_GPU:
            switches["pipeline_tiles"] = True
    if LATE_P_GPU and block_m == 192:
        switches.update(late_p=True, tma_producer=False)
    return switches


def with_switches(kernel, switches, made):
    """`kernel`, or `kernel.with_options(**switches)` made once and kept in the caller's dict
    `made` (a launcher's kernel object is the key of its plans: one object per variant)."""
    if not switches:
        return kernel
    key = (id(kernel), tuple(sorted(switches.items())))
    if key not in made:
        made[key] = kernel.with_options(**switches)
    return made[key]


def short_tiles(mean_key_blocks, D=0):
    """Whether a persistent launch whose tiles visit `mean_key_blocks` key blocks on average
    (of head dim D) copies Q from the producer (PRODUCER_ONCE_MAX_BLOCKS, PRODUCER_ONCE_MAX_D).
    The threshold is in work: PRODUCER_ONCE_MAX_BLOCKS blocks of d128, twice as many of d64
    (H200, 2026-12-05: d64 4k causal, 16.5 blocks a tile, +4 % with Q from the producer; 4k
    non-causal, 32 blocks, even)."""
    per_block = 2 if 0 < D <= 64 else 1          # D 0: not said (FP8's d128 and d256)
    return (PRODUCER_ONCE_GPU and D <= PRODUCER_ONCE_MAX_D
            and mean_key_blocks <= PRODUCER_ONCE_MAX_BLOCKS * per_block)


#: Past this many tiles greedy_schedule takes its tiles a round of `programs` at a time (the
#: heap costs ~2.5 µs a tile: 40 ms at this size, 0.4 s at 128k tiles, on a first call).
GREEDY_MAX_TILES = 1 << 14


def greedy_schedule(costs, programs):
    """Which program computes which tile: the tiles taken in their order (the launch order of
    a grid of one program a tile, whose neighbours share K/V in L2), each by the program that
    is free first — what the hardware does with a grid of one program a tile, from estimated
    costs. Past GREEDY_MAX_TILES tiles, a round of `programs` consecutive tiles at a time, the
    costliest to the least loaded program (loads then differ by at most one tile's cost).
    Returns (tiles, starts): program p computes tiles[starts[p]:starts[p + 1]], int32, in
    launch order."""
    costs = np.asarray(costs, dtype=np.float64)
    n = len(costs)
    owner = np.arange(n) % programs
    if n > programs and not np.all(costs == costs[0]):
        if n <= GREEDY_MAX_TILES:
            free = [(float(costs[p]), p) for p in range(programs)]
            heapq.heapify(free)
            for t in range(programs, n):
                at, p = heapq.heappop(free)
                owner[t] = p
                heapq.heappush(free, (at + float(costs[t]), p))
        else:
            load = np.zeros(programs)
            for s in range(0, n, programs):
                c = costs[s:s + programs]
                least = np.argsort(load, kind="stable")[:len(c)]
                largest = np.argsort(-c, kind="stable")
                owner[s + largest] = least
                load[least] += c[largest]
    tiles = np.argsort(owner, kind="stable").astype(np.int32)
    starts = np.zeros(programs + 1, dtype=np.int32)
    starts[1:] = np.cumsum(np.bincount(owner, minlength=programs))
    return tiles, starts


def persistent_programs(q, chip, BM, BN, tiles, causal=False):
    """The programs of a persistent launch over `tiles` tiles on q's device (at most one an
    SM), or 0 where kernels with blocks BM x BN do not run persistent on `chip`
    (PERSISTENT_BLOCKS; PERSISTENT_CAUSAL_BLOCKS where `causal`), or there is no tile."""
    if not PERSISTENT_GPU or tiles <= 0 or ((chip, BM, BN) not in PERSISTENT_BLOCKS and not (
            causal and (chip, BM, BN) in PERSISTENT_CAUSAL_BLOCKS)):
        return 0
    from .serving_decode import num_sms
    return min(tiles, num_sms(q))
