"""The kernel cache: the key, the GPU compile behind it, and explanations of misses.

A cubin is looked up by a key that is correct by construction: the SHA-256 of a canonical JSON
record of its *ingredients* (docs/cache.md):

- ``kernel``: the kernel's name (it is the cubin's entry point);
- ``tile_ir``: SHA-256 of the tile IR after the front end, printed without locations — so
  comments, blank lines, line numbers and the file's path never reach the key;
- ``specialization``: the argument signature and the constexpr values, canonicalised (a
  @tessel.jit function passed as a constexpr is named by its qualified name — never by its
  address or module, which is derived from a file path; its code is in the tile IR);
- ``chip``;
- ``options``: every field of the frozen option records (CompileOptions, GpuOptions) marked as
  changing code, plus the C++ TargetOptions' own canonical string (lib/Target/Compile.cpp, guarded
  by a static_assert on the struct);
- ``tessel``, ``llvm``, ``ptxas``: the tessel version with the build id of the compiler binary,
  LLVM's version, and the output of ``ptxas --version``.

Each option field must say in its metadata whether it changes code (``code=True``/``False``);
``code_fields`` refuses a record with an unclassified field, so a new option cannot silently
stay out of the key.

Lookup order: this process's memory, then the disk cache (tessel._tessel.KernelCache, C++:
verified on load, written atomically), then a compile whose result is stored in both.
``TESSEL_CACHE_EXPLAIN=1`` prints on every miss which ingredient differs from the nearest entry
of the same kernel.
"""
import concurrent.futures
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import subprocess
import sys
import threading
import time
import warnings

from . import timing
from .errors import CompilationError
from .version import VERSION

log = logging.getLogger("tessel.cache")

CHIPS = ("sm_80", "sm_90a")
CODEGENS = ("reference", "mma", "wgmma", "auto")


class CacheWarning(UserWarning):
    """The disk cache could not be written: kernels are kept in memory (said once per process)."""


def check_spill_bytes(value):
    """Raises ValueError unless `value` is an int (not a bool) in [0, 1024]: the bytes of
    spill an occupancy hint may add (GpuOptions and CompileOptions.occupancy_spill_bytes)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1024:
        raise ValueError(f"occupancy_spill_bytes must be an int in [0, 1024], got {value!r}")


@dataclasses.dataclass(frozen=True)
class GpuOptions:
    """How a kernel is compiled for the GPU: ``kernel.binary(tessel.GpuOptions(...))``.

    Frozen; its code-changing fields feed the cache key. Also ``tessel.cache.GpuOptions``.

    Raises:
        ValueError: an unknown chip or codegen, num_threads outside [1, 1024], num_stages
            other than 2, 3 or 4, or an occupancy_spill_bytes outside [0, 1024].
        TypeError: a wgmma_overlap, wgmma_async_dots, occupancy_hints, sink_waits,
            warp_specialize, overlap_consumers, pingpong, producer_once, tma_producer,
            tma_only, vector_stores, pipeline_tiles, late_p, rescale_under_s, drop_tma_fences,
            fp8_overlap, fuse_masked_loops, sync_masked_loops, skip_masked_warpgroups,
            spill_fallbacks or trim_zero_columns that is not a bool.
    """

    #: The target, "sm_80" (A100 and later) or "sm_90a" (H100/H200).
    chip: str = dataclasses.field(default="sm_90a", metadata={"code": True})
    #: PTX features for the NVPTX backend.
    features: str = dataclasses.field(default="+ptx80", metadata={"code": True})
    #: Threads per CTA of the reference lowering (the fast paths choose their own).
    num_threads: int = dataclasses.field(default=128, metadata={"code": True})
    #: The lowering, "reference", "mma" (mma.sync), "wgmma" (sm_90a) or "auto" (wgmma on
    #: sm_90a, else mma, where the kernel fits; else reference).
    codegen: str = dataclasses.field(default="auto", metadata={"code": True})
    #: On the sm_90a wgmma path, overlap each block's softmax with the previous block's P·V
    #: inside a warpgroup (FA3's schedule). Off by default, measured slower for the default
    #: blocks (docs/bench/2026-11-29-h200-wgmma-overlap.md).
    wgmma_overlap: bool = dataclasses.field(default=False, metadata={"code": True})
    #: How many stages the fast paths' ring of loop-body loads has, 2 to 4 (the K/V blocks in
    #: flight ahead of the one in use); more hide more latency and cost shared memory. The
    #: overlapped wgmma schedule keeps two. A knob for tuning (issue 16/18's autotuning).
    num_stages: int = dataclasses.field(default=2, metadata={"code": True})
    #: On the sm_90a wgmma path, issue each dot where it stands and wait for it just before its
    #: result is first used (tilegpu-async-dots), so independent dots run back to back and the
    #: code between a dot and its use runs under it. Off by default: a knob measured on the
    #: backward's programs (docs/dev/backward.md).
    wgmma_async_dots: bool = dataclasses.field(default=False, metadata={"code": True})
    #: Where a kernel's registers, not its shared memory, cap its CTAs per SM and a third
    #: fewer would let one more in, ask ptxas again for that occupancy (`.minnctapersm`) and
    #: keep the cubin if nothing spills (docs/bench/2026-12-03-h200-occupancy.md). On by
    #: default; off to compare.
    occupancy_hints: bool = dataclasses.field(default=True, metadata={"code": True})
    #: How many bytes of spill stores (registers ptxas sends to local memory) the occupancy
    #: hint may add and still keep its cubin; a kernel that allows any is also asked for one
    #: CTA more than its registers allow, however far that is. 0, the default, keeps a hinted
    #: cubin only where nothing more spills. A kernel whose extra CTA pays for a small spill
    #: asks for it (the backward's d64 key-rows program; measured 25 % faster at 56 bytes:
    #: docs/bench/2026-12-05-h100-s33.md).
    occupancy_spill_bytes: int = dataclasses.field(default=0, metadata={"code": True})
    #: On the fast paths, wait for a block loaded before a loop (Q) below the loop's first
    #: copies, so that both are in flight at once (tilegpu-sink-waits). On by default; off to
    #: compare.
    sink_waits: bool = dataclasses.field(default=True, metadata={"code": True})
    #: On the sm_90a wgmma path, for blocks of two consumer warpgroups (128 rows) whose loops
    #: stream K/V, copy those blocks from a producer warpgroup of their own, with mbarriers
    #: between it and the consumers in place of CTA barriers (tilegpu-warp-specialize):
    #: +5 to +15 % at d128 and d256 on the H200 (docs/bench/2026-12-03-h200-warp-specialize.md).
    #: On by default; off to compare.
    warp_specialize: bool = dataclasses.field(default=True, metadata={"code": True})
    #: In those warp-specialized kernels, FA3's intra-warpgroup overlap in each consumer
    #: warpgroup: the softmax of a key block runs under the previous block's P·V
    #: (tilegpu-overlap-consumers; where the registers allow: d <= 128). On by default; off to
    #: compare.
    overlap_consumers: bool = dataclasses.field(default=True, metadata={"code": True})
    #: In those overlapped kernels of two consumer warpgroups, the warpgroups take turns
    #: issuing their dots (FA3's ping-pong, tilegpu-pingpong): +4 to +5 % at d128 4k on the
    #: H200, neutral elsewhere (docs/bench/2026-12-03-h200-overlap-consumers.md). With
    #: overlap_consumers off, the synchronous consumers take their turns around the softmax
    #: instead (cuDNN's schedule; not yet measured: docs/bench/2026-12-04-h200-ncu-profile.md).
    #: On by default; off to compare.
    pingpong: bool = dataclasses.field(default=True, metadata={"code": True})
    #: In those warp-specialized kernels, the producer copies the blocks loaded once a tile
    #: (Q) too, ahead of the tile's K/V (tilegpu-producer-once), into two buffers in a
    #: persistent kernel: the next tile's Q lands while this one runs. Off by default;
    #: tessel.attention's kernels ask it where their tiles are short (grid.short_tiles:
    #: +2 to +6.5 % there, long causal rows measured slower).
    producer_once: bool = dataclasses.field(default=False, metadata={"code": True})
    #: In those warp-specialized kernels, the producer's block copies go through TMA
    #: (cp.async.bulk.tensor from one thread) with tensor maps the kernel builds itself
    #: (tilegpu-tma-producer; docs/dev/notes/2026-12-04-tma-ptx.md), where a kernel's shared
    #: memory keeps it alone on its SM; one 3-D map a tensor (the head a coordinate), built
    #: once a kernel. +2 to +5 % on dense d128 with vector_stores on the H200 (docs/bench/
    #: 2026-12-04-h200-epilogue-tma.md); a module that spills with it is compiled again
    #: without. On by default; off to compare.
    tma_producer: bool = dataclasses.field(default=True, metadata={"code": True})
    #: The launcher guarantees what TMA needs of the copies tma_producer makes (16-byte
    #: aligned origins and row strides, at most 256 SMs): they take TMA without the run-time
    #: check and the cp.async copy beside it — an eighth less PTX at d128, ptxas 8 % faster.
    #: tessel.attention's dense and block-sparse kernels ask for it (layouts.ALIGNED_INPUTS:
    #: their inputs are 16-byte aligned or copied, and sm_90a devices have under 256 SMs); off
    #: by default: a kernel's own descriptors may not be aligned.
    tma_only: bool = dataclasses.field(default=False, metadata={"code": True})
    #: On the fast paths, 16-bit accumulator tiles (attention's O) are stored 16 bytes a thread:
    #: the four threads of a quad exchange their column pairs by shuffles so that each holds
    #: eight consecutive columns — a quarter of the store instructions (the epilogue's 4-byte
    #: stores stalled the d128 forward's consumers at every tile: docs/bench/
    #: 2026-12-04-h200-tile-boundaries.md): +2 to +9 % on the d128 forward (H200, docs/bench/
    #: 2026-12-04-h200-epilogue-tma.md); a module that spills with it is compiled again
    #: without. On by default; off to compare.
    vector_stores: bool = dataclasses.field(default=True, metadata={"code": True})
    #: In a persistent kernel whose Q the producer copies (producer_once), the next tile's
    #: first S = Q·K₀ᵀ is issued before this tile's epilogue and waited for by the next tile
    #: (tilegpu-pipeline-tiles;
    #: docs/dev/notes/2026-12-04-tile-pipelining.md): the tensor cores work under the
    #: epilogue. Off by default until measured on the H200.
    pipeline_tiles: bool = dataclasses.field(default=False, metadata={"code": True})
    #: Overlapped consumers whose registers cannot hold S_j, O and two P tiles (d64's three
    #: consumer warpgroups at 152 registers) make P_j after the previous P·V's wait, one P live
    #: at a time, and take the registers of a producer that copies by cp.async (160 each, the
    #: producer 32: FlashAttention-3's d64 kernel). A TMA producer keeps its registers, so with
    #: tma_producer on (the default for persistent kernels) this changes nothing there. Off by
    #: default until measured on the H200.
    late_p: bool = dataclasses.field(default=False, metadata={"code": True})
    #: Overlapped consumers multiply O by the previous block's α in the next iteration, between
    #: the S group and the P·V group that reads O, where S's wgmma runs beside the multiplies,
    #: instead of after O's wait, where the warpgroup's tensor work has ended (d256: 128 a
    #: thread a key block; without them at all the H200 ran d256 5-8 % faster). Bit for bit the
    #: same results. Off: on an H100 (docs/bench/2026-12-05-h100-s35.md) two calls disagreed,
    #: d256 −6 to +9 %, d128 ±1 %; worth a round on an H200.
    rescale_under_s: bool = dataclasses.field(default=False, metadata={"code": True})
    #: With tma_only, the consumers read what TMA landed without the ``fence.proxy.async``
    #: after their ``full`` waits (tilegpu-drop-tma-fences): TMA writes through the async proxy
    #: that wgmma reads, as CUTLASS's and FlashAttention-3's consumers assume; a fence stays
    #: where a cp.async copy or a store also writes the ring's bytes. d128 128×128: 6 → 1
    #: fences. On since an H100 run (2026-12-06): the GPU suites' bits unchanged, +1 to +4 %
    #: on dense d128 16k and the block masks (docs/bench/2026-12-06-h100-s37.md).
    drop_tma_fences: bool = dataclasses.field(default=True, metadata={"code": True})
    #: FP8 kernels' consumers overlapped as fp16's are (S_j issued beside the previous P·V,
    #: tilegpu-overlap-consumers): their V, which the producer stores transposed, read so by
    #: the P·V. d128 compiles with 0 spill at 224 registers; FP8's softmax weighs more against
    #: its halved tensor work, so the overlap should weigh more too. Off by default until
    #: measured on the H200.
    fp8_overlap: bool = dataclasses.field(default=False, metadata={"code": True})
    #: Dots summed along a B block's columns (S = Q·Kᵀ) run their k steps only over the
    #: columns the block's copies fill: past a descriptor's constant column count the copies
    #: write zeros, as a head dim padded inside the kernel (DB) has them — at 96 in blocks of
    #: 128, S takes 6 of 8 k steps (convert-tile-to-mma trim-zero-columns). On since its H100
    #: check (the forward at d96/d80 +0 to +10 %, the backward +4 to +10 %:
    #: docs/bench/2026-12-06-h100-s43.md); False to compare.
    trim_zero_columns: bool = dataclasses.field(default=True, metadata={"code": True})
    #: Dots whose B block is read as stored (P·V's V; the backward's dO, Q and K) compute only
    #: the output columns the block's copies fill — wgmma's N of 96 at d96 in blocks of 128
    #: (mma.sync keeps its n tiles) — the accumulator's other columns keep their value (B's
    #: zero columns add nothing to them). On since its H100 checks (forward 32/32, backward
    #: 8/8, then every DB case with the serving kernels' 168/168 against float32/float64; d96
    #: forward +2 to +6 %, backward +2 to +10 %: docs/bench/2026-12-06-h100-s43.md, -s44.md);
    #: False to compare.
    trim_output_columns: bool = dataclasses.field(default=True, metadata={"code": True})
    #: On the fast paths, the copies tile-split-masked-loops makes of a masked key loop (an
    #: unmasked loop over the blocks the mask shows whole, masked loops for the boundary
    #: blocks) run as one loop whose mask is skipped under a uniform branch where it is all
    #: true (tilegpu-fuse-masked-loops): half the code of an attention kernel, half its cold
    #: compile (d128 128×128: 1.06 → 0.62 s here, 2.4 → 1.4 s on a slow H200 host), but
    #: 2–6 % slower on the H200 (docs/bench/2026-12-05-h200-fuse-masked-loops.md). Off by
    #: default: a knob for compile-time-bound uses.
    fuse_masked_loops: bool = dataclasses.field(default=False, metadata={"code": True})
    #: Whether overlapped consumers leave synchronous the loops that the split keeps masked,
    #: the boundary blocks — the key tail, the causal diagonal, one or two blocks a tile.
    #: Overlapped, such a loop is all peel and drain, the same work in twice the code. A
    #: quarter less code at d128 128×128, first call 1.07–1.18 → 0.84–0.88 s here, as fast on
    #: an H100 (docs/bench/2026-12-05-h100-sync-masked-loops.md). On; off to compare.
    sync_masked_loops: bool = dataclasses.field(default=True, metadata={"code": True})
    #: Whether, in those synchronous masked loops, each consumer warpgroup branches around the
    #: key blocks its own 64 rows cannot see (tilegpu-skip-masked-warpgroups): d64's 192-row
    #: causal tiles hide a whole block from their first warpgroups. Off until measured.
    skip_masked_warpgroups: bool = dataclasses.field(default=False, metadata={"code": True})
    #: Where ptxas spills, compile again with the register-hungry switches given up in turn
    #: (the TMA producer, the scale fold, the vector stores, the overlap) and given back where
    #: they were not needed; ``manifest["given_up"]`` says what went. On by default; off for a
    #: kernel that spills whatever is given up, whose searches would be compiles spent (the
    #: d128 backward's key-rows program: backward.NO_SPILL_SEARCH).
    spill_fallbacks: bool = dataclasses.field(default=True, metadata={"code": True})
    #: The CUDA toolkit whose ptxas makes cubins; empty for $CUDA_HOME or /usr/local/cuda.
    #: Not in the key as a path: ptxas' version is, so moving the toolkit does not invalidate
    #: the cache and swapping it for another release does.
    toolkit: str = dataclasses.field(default="", metadata={"code": False})

    def __post_init__(self):
        if self.chip not in CHIPS:
            raise ValueError(f"unknown chip '{self.chip}' (expected one of {', '.join(CHIPS)})")
        if self.codegen not in CODEGENS:
            raise ValueError(f"unknown codegen '{self.codegen}' (expected one of "
                             f"{', '.join(CODEGENS)})")
        for name in ("wgmma_overlap", "wgmma_async_dots", "occupancy_hints", "sink_waits",
                     "warp_specialize", "overlap_consumers", "pingpong", "producer_once",
                     "tma_producer", "tma_only", "vector_stores", "pipeline_tiles", "late_p",
                     "rescale_under_s", "drop_tma_fences", "fp8_overlap", "fuse_masked_loops",
                     "sync_masked_loops", "skip_masked_warpgroups", "spill_fallbacks",
                     "trim_zero_columns", "trim_output_columns"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if not 1 <= int(self.num_threads) <= 1024:
            raise ValueError("num_threads must be between 1 and 1024")
        if isinstance(self.num_stages, bool) or self.num_stages not in (2, 3, 4):
            raise ValueError(f"num_stages must be 2, 3 or 4, got {self.num_stages!r}")
        check_spill_bytes(self.occupancy_spill_bytes)


def code_fields(record):
    """{field: value} of the fields of a frozen option record that change code."""
    out = {}
    for f in dataclasses.fields(record):
        if "code" not in f.metadata:
            raise TypeError(f"{type(record).__name__}.{f.name} does not say whether it changes "
                            "code: give it metadata={'code': True|False}")
        if f.metadata["code"]:
            value = getattr(record, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value   # as JSON has it
    return out


# --- versions ----------------------------------------------------------------------------------

_versions_lock = threading.Lock()
_build_id = None
_ptxas_versions = {}


def build_id():
    """The build id of the compiler binary, tessel._tessel: any change of the C++ compiler,
    committed or not, is a new build id.

    It is the ELF build id the linker wrote (SHA-1 of the linked extension, asked for in
    python/CMakeLists.txt), read from memory by ``_tessel.build_id()``: nothing is read from
    disk. A binary without one (another linker or platform) is hashed instead: SHA-256 of the
    file, 16 hex digits, ~0.1 s once per process for the 110 MB extension."""
    global _build_id
    with _versions_lock:
        if _build_id is None:
            from . import _tessel
            elf = _tessel.build_id()
            _build_id = f"elf:{elf}" if elf else file_build_id(_tessel.__file__)
        return _build_id


def file_build_id(path):
    """SHA-256 (16 hex digits) of a file: the build id of a binary that carries none."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


def tessel_version():
    return f"{VERSION}+{build_id()}"


def llvm_version():
    from . import _tessel
    return _tessel.llvm_version


def ptxas_version(toolkit=""):
    """The first lines of `ptxas --version` of the ptxas tessel would run."""
    from . import _tessel
    path = _tessel.find_ptxas(toolkit)
    if not path:
        raise CompilationError("no ptxas found: install the CUDA toolkit or set CUDA_HOME")
    with _versions_lock:
        if path not in _ptxas_versions:
            out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
            lines = [l.strip() for l in out.stdout.splitlines() if l.strip()]
            # "Cuda compilation tools, release 13.0, V13.0.48" and the build line: the copyright
            # lines carry nothing more.
            _ptxas_versions[path] = " | ".join(l for l in lines if "Copyright" not in l)
        return _ptxas_versions[path]


# --- the key -----------------------------------------------------------------------------------

def canonical_value(value):
    """A JSON value that names a constexpr the same way in every process."""
    from . import _tessel
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return repr(value)            # exact, and keeps nan/inf representable
    # A @tessel.jit function: JITFunction (jit.py) is the one subclass of the C Dispatcher, which
    # names it here without importing the JIT.
    if isinstance(value, _tessel.Dispatcher):
        fn = value.fn
        return f"jit:{fn.__qualname__}"   # its code is in the tile IR; a module name is a path
    if isinstance(value, (tuple, list)):
        return [canonical_value(v) for v in value]
    text = repr(value)
    if " at 0x" in text:
        raise TypeError(f"constexpr of type {type(value).__name__} has no stable name for the "
                        "kernel cache")
    return f"{type(value).__module__}.{type(value).__qualname__}:{text}"


def canonical_specialization(spec):
    out = []
    for item in spec:
        if item[1] == "constexpr":
            name, _, type_name, value = item
            out.append([name, "constexpr", type_name, canonical_value(value)])
        else:
            out.append(list(item))
    return out


def sha256_text(text):
    return hashlib.sha256(text.encode()).hexdigest()


def target_fields(gpu):
    """GpuOptions `gpu` as the C++ compile's keyword arguments (every field, num_threads an
    int)."""
    return dict(dataclasses.asdict(gpu), num_threads=int(gpu.num_threads))


def ingredients(kernel, gpu):
    """The key's ingredients for CompiledKernel `kernel` compiled with GpuOptions `gpu`."""
    from . import _tessel
    options = {f"compile.{k}": v for k, v in code_fields(kernel.options).items()}
    # The chip is an ingredient of its own.
    options.update({f"gpu.{k}": v for k, v in code_fields(gpu).items() if k != "chip"})
    options["target"] = _tessel.target_options_key(**target_fields(gpu))
    return {
        "kernel": kernel.name,
        "tile_ir": sha256_text(kernel.asm["tile"]),
        "specialization": canonical_specialization(kernel.specialization),
        "chip": gpu.chip,
        "options": options,
        "tessel": tessel_version(),
        "llvm": llvm_version(),
        "ptxas": ptxas_version(gpu.toolkit),
    }


def key_of(ingr):
    """The cache key: SHA-256 of the ingredients as canonical JSON."""
    return sha256_text(json.dumps(ingr, sort_keys=True, separators=(",", ":")))


# --- explanations ------------------------------------------------------------------------------

def _short(v):
    s = json.dumps(v) if not isinstance(v, str) else v
    if isinstance(v, str) and len(v) == 64 and all(c in "0123456789abcdef" for c in v):
        return v[:12]
    return s if len(s) <= 60 else s[:57] + "..."


def differences(mine, theirs):
    """[(what, mine, theirs)] between two ingredient records, most specific names first."""
    out = []
    for name in sorted(set(mine) | set(theirs)):
        a, b = mine.get(name), theirs.get(name)
        if a == b:
            continue
        if name == "options" and isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b)):
                if a.get(k) != b.get(k):
                    out.append((f"option {k}", a.get(k), b.get(k)))
        elif name == "specialization" and isinstance(a, list) and isinstance(b, list):
            da = {x[0]: x[1:] for x in a}
            db = {x[0]: x[1:] for x in b}
            for k in [x[0] for x in a] + [x[0] for x in b if x[0] not in da]:
                if da.get(k) != db.get(k):
                    va = da.get(k, [None])[-1] if da.get(k) else None
                    vb = db.get(k, [None])[-1] if db.get(k) else None
                    out.append((f"specialization {k}", va, vb))
        elif name == "tile_ir":
            out.append(("tile IR", a, b))
        else:
            out.append((name, a, b))
    # The C++ target string is derived from the chip and the gpu options: name it only when
    # nothing else explains it.
    if len(out) > 1:
        out = [d for d in out if d[0] != "option target"]
    return out


def explain_miss(cache, ingr):
    """One line: why `ingr` misses in `cache`, against the nearest entry of the same kernel."""
    key = key_of(ingr)
    nearest = None
    for info in cache.list():
        if info["temporary"] or info["problem"] or info["kernel"] != ingr["kernel"]:
            continue
        try:
            theirs = json.loads(info["manifest"]).get("ingredients", {})
        except ValueError:
            continue
        diffs = differences(ingr, theirs)
        if nearest is None or len(diffs) < len(nearest[1]):
            nearest = (info["key"], diffs)
    if nearest is None:
        return f"miss: no entry for kernel '{ingr['kernel']}' in {cache.directory}"
    entry, diffs = nearest
    if entry == key:
        return f"hit: entry {key[:12]}"
    if not diffs:
        return (f"miss: the nearest entry {entry[:12]} has the same ingredients but another key "
                "(written by another version of the key's format)")
    what = "; ".join(f"{name} differs ({_short(a)} vs {_short(b)})" for name, a, b in diffs)
    return f"miss: {what} [nearest entry {entry[:12]}]"


# --- the lookup --------------------------------------------------------------------------------

@dataclasses.dataclass
class GpuBinary:
    """One kernel compiled for one chip: what a launcher needs (``CompiledKernel.binary``)."""

    key: str
    name: str                   # the cubin's entry point
    chip: str
    cubin: bytes
    ptx: str
    block: tuple
    dynamic_shared_bytes: int
    manifest: dict
    source: str                 # "compiled", "disk" or "memory"
    # [(step, seconds)] of what this lookup did (tessel/timing.py): the front end's steps when
    # it compiled, the key, the disk, the C++ compile; empty for a memory hit.
    timings: list = dataclasses.field(default_factory=list)


_memory = {}
_memory_lock = threading.Lock()
_caches = {}


def cache_directory():
    from . import _tessel
    return _tessel.KernelCache.default_directory()


def disk_cache(directory=None):
    """The KernelCache of `directory` (default: $TESSEL_CACHE_DIR or ~/.cache/tessel)."""
    from . import _tessel
    directory = directory or cache_directory()
    with _memory_lock:
        if directory not in _caches:
            _caches[directory] = _tessel.KernelCache(directory)
        return _caches[directory]


def forget_memory():
    """Drops this process's in-memory binaries (tests; the disk cache stays)."""
    with _memory_lock:
        _memory.clear()
        _caches.clear()


def _binary_from_entry(entry, source):
    m = json.loads(entry["manifest"])
    return GpuBinary(key=entry["key"], name=m["entry"], chip=m["chip"], cubin=entry["cubin"],
                     ptx=entry["ptx"], block=tuple(m["block"]),
                     dynamic_shared_bytes=int(m["dynamic_shared_bytes"]), manifest=m,
                     source=source)


def _explain_enabled():
    return os.environ.get("TESSEL_CACHE_EXPLAIN", "") not in ("", "0")


#: Seconds a compile may run before tessel says on stderr what it is doing: a first call that
#: waits (a large kernel, or one that spills and goes through the spill fallbacks, several
#: compiles) is then not mistaken for a hang. TESSEL_QUIET=1 silences it.
SLOW_COMPILE_S = 3.0


@contextlib.contextmanager
def _slow_compile_notice(kernel, gpu):
    """Around a compile: past SLOW_COMPILE_S, one line on stderr saying which kernel compiles
    and that the result is cached, and at the end how long it took and, where ptxas spilled,
    how many compiles that cost and what was given up. The caller puts the GpuBinary and its
    compile's steps in the dict this yields."""
    outcome = {}
    if os.environ.get("TESSEL_QUIET", "") not in ("", "0"):
        yield outcome
        return
    start = time.monotonic()
    said = threading.Event()

    def notice():
        said.set()
        sys.stderr.write(f"tessel: compiling {kernel.name} for {gpu.chip} (the first call of "
                         f"this specialisation; later calls load it from the cache)...\n")
        sys.stderr.flush()
    timer = threading.Timer(SLOW_COMPILE_S, notice)
    timer.daemon = True
    timer.start()
    try:
        yield outcome
    finally:
        timer.cancel()
        timer.join()
        if said.is_set():
            sys.stderr.write(f"tessel: compiled {kernel.name} for {gpu.chip} in "
                             f"{time.monotonic() - start:.1f} s{_spill_story(outcome)}\n")
            sys.stderr.flush()


def _spill_story(outcome):
    """The compile notice's last words where compileModule compiled again because ptxas
    spilled (lib/Target/SpillFallbacks.cpp): how many compiles and what was given up; else
    empty."""
    binary, steps = outcome.get("binary"), outcome.get("steps", [])
    again = sum(1 for name, _ in steps if name.startswith("compile again"))
    if binary is None or not again:
        return ""
    given_up = binary.manifest.get("given_up", [])
    left = binary.manifest.get("spill_bytes", 0)
    story = f"gave up {', '.join(given_up)}" if given_up else "nothing given up in the end"
    if left:
        story += f"; still {left} bytes of spill"
    return f" ({again + 1} compiles: ptxas spilled; {story})"


def get_binary(kernel, gpu=None, directory=None):
    """The GpuBinary of CompiledKernel `kernel` for GpuOptions `gpu`, from memory, disk or a compile."""
    gpu = gpu or GpuOptions()
    clock = timing.Steps()
    build_id()
    clock.lap("compiler version")
    ptxas_version(gpu.toolkit)
    clock.lap("ptxas --version")
    ingr = ingredients(kernel, gpu)
    key = key_of(ingr)
    clock.lap("cache key")
    with _memory_lock:
        hit = _memory.get(key)
    if hit is not None:
        return dataclasses.replace(hit, source="memory", timings=[])
    cache = disk_cache(directory)
    entry, problem = cache.lookup(key)
    if problem:
        log.warning("tessel: discarded a bad cache entry %s (%s); rebuilding", key[:12], problem)
    clock.lap("disk lookup")
    pass_timing = ""
    if entry is not None:
        binary = _binary_from_entry(entry, "disk")
        clock.lap("disk load")
    else:
        if _explain_enabled():
            print(f"tessel cache: {kernel.name}: {explain_miss(cache, ingr)}", file=sys.stderr)
        with _slow_compile_notice(kernel, gpu) as outcome:
            binary, pass_timing = _compile(kernel, gpu, key, ingr, cache, clock)
            outcome.update(binary=binary, steps=clock.steps)
    # The front end's steps come first when this lookup is the kernel's first: they are part of
    # its cold compile.
    steps = list(getattr(kernel, "timings", [])) if not getattr(kernel, "_timings_reported",
                                                                   False) else []
    kernel._timings_reported = True
    binary.timings = steps + clock.steps
    timing.report(f"{kernel.name} for {gpu.chip}: {binary.source} (key {key[:12]})",
                  binary.timings, pass_timing)
    with _memory_lock:
        _memory[key] = binary
    return binary


def compile_threads():
    """How many compiles tessel runs at once: TESSEL_COMPILE_THREADS, else the hardware
    threads, at most 8 (what the C++ compiles ahead take: lib/Target/CompilesAhead.cpp)."""
    try:
        return max(1, int(os.environ["TESSEL_COMPILE_THREADS"]))
    except (KeyError, ValueError):
        return max(1, min(os.cpu_count() or 1, 8))


def get_binaries(pairs):
    """The GpuBinaries of [(CompiledKernel, GpuOptions)], in order, compiled side by side on up
    to compile_threads() threads: the compile lets the GIL go, so a group of kernels needed at
    once (the backward's programs) waits for its slowest compile, not for their sum. The first
    error is raised, as get_binary raises it."""
    pairs = list(pairs)
    threads = min(len(pairs), compile_threads())
    if threads <= 1:
        return [get_binary(k, g) for k, g in pairs]
    with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="tessel-compile") as pool:
        return list(pool.map(lambda pair: get_binary(*pair), pairs))


def _compile(kernel, gpu, key, ingr, cache, clock):
    """(GpuBinary, MLIR's pass timing report or ""): compiles and stores in `cache`."""
    r = kernel._builder.compile_gpu(timing.enabled(), **target_fields(gpu))
    clock.add(r.get("timings", []))
    if not r["ok"]:
        errors = [d for d in r["diagnostics"] if d[0] == "error"] or r["diagnostics"]
        _, message, filename, line, col = errors[0] if errors else ("error", "failed", "", 0, 0)
        raise CompilationError(f"compiling {kernel.name} for {gpu.chip}: {message}",
                               filename or None, line or None, col or None)
    kernels = r["kernels"]
    launch = next((k for k in kernels if k["name"] == kernel.name), kernels[0])
    manifest = {
        "kernel": kernel.name,
        "entry": launch["name"],
        "chip": gpu.chip,
        "signature": [[n, k, d] for n, k, d in kernel.params],
        "block": list(launch["block"]),
        "dynamic_shared_bytes": launch["dynamic_shared_bytes"],
        "static_shared_bytes": launch.get("static_shared_bytes", 0),
        "registers": launch.get("registers", 0),
        "spill_bytes": launch.get("spill_bytes", 0),
        # What the compiler gave up because ptxas spilled with it (its spill fallbacks:
        # "tma-producer", "scale fold", "vector-stores", "overlap-consumers").
        "given_up": list(r.get("given_up", [])),
        "ingredients": ingr,
    }
    from .jit import _explain
    if manifest["given_up"] and _explain():
        print(f"tessel: {kernel.name} for {gpu.chip}: ptxas spilled with "
              f"{', '.join(manifest['given_up'])}: compiled without "
              f"({manifest['spill_bytes']} bytes of spill left)", file=sys.stderr)
    what, warning = cache.store(key, r["cubin"], r["ptx"], json.dumps(manifest))
    clock.lap("cache write")
    if warning:
        warnings.warn(warning, CacheWarning, stacklevel=3)
    manifest.update(key=key)
    return GpuBinary(key=key, name=launch["name"], chip=gpu.chip, cubin=r["cubin"], ptx=r["ptx"],
                     block=tuple(launch["block"]),
                     dynamic_shared_bytes=int(launch["dynamic_shared_bytes"]),
                     manifest=manifest, source="compiled"), r.get("pass_timing", "")
