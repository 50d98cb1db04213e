"""tessel.distributed.ring_attention on CPU processes with gloo (issue 17).

Each world size (2, 3, 4) is one torchrun-style launch: WORLD_SIZE processes of ring_worker.py,
RANK / MASTER_ADDR / MASTER_PORT in the environment (init_method env://), a free port each.
Every rank runs every case of ring_worker.cases() and writes its verdicts; each test here reads
one case's verdicts from every rank. The launches import torch in their own processes only:
this process never imports torch (other tests put a stand-in `torch` in sys.modules).

The cases with a score_mod / mask_mod (MOD_CASES: global positions, forward and backward,
no retrace per step, the errors) run in the launches of world sizes 2 and 3.

The sharding helpers and the global-position wrappers are checked here as well, on numpy (they
need no torch).
"""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from dsl_helpers import needs_ptxas

from tessel import language as tl
from tessel.distributed import (contiguous_shard, merge_partial, split_sizes, zigzag_shard,
                                zigzag_unshard)

HERE = pathlib.Path(__file__).resolve().parent
HAVE_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed")

CASES = ["full-contiguous", "full-zigzag", "causal-contiguous", "causal-zigzag",
         "causal-zigzag-even", "gqa-full", "gqa-causal-zigzag", "f16-causal-zigzag",
         "bf16-causal-contiguous", "backward-causal-zigzag-gqa",
         "backward-causal-contiguous-lse", "backward-full-gqa", "world-one", "world-one-bf16",
         "bad-zigzag-shards", "zigzag-round-trip"]
MOD_CASES = ["mod-alibi-causal-contiguous", "mod-alibi-causal-zigzag-gqa", "mod-softcap-zigzag",
             "mod-flash-arguments-zigzag", "mod-flash-alibi-zigzag-gqa",
             "mod-window-contiguous", "mod-window-zigzag", "mod-causal-window-contiguous",
             "mod-causal-window-zigzag", "mod-prefix-lm-contiguous", "mod-prefix-lm-zigzag",
             "mod-document-alibi-causal-zigzag", "mod-rows-without-keys", "mod-cross-zigzag",
             "mod-cross-contiguous", "mod-f16-causal-zigzag", "mod-backward-causal-zigzag",
             "mod-backward-causal-contiguous", "mod-backward-prefix-lm-zigzag",
             "mod-backward-rows-without-keys", "mod-window-skips-pairs-causal",
             "mod-window-skips-pairs-zigzag", "mod-window-skips-pairs-causal-zigzag",
             "mod-world-one", "mod-no-recompile",
             "mod-bad-mask-mod", "mod-bad-arity", "mod-mismatch"]
LAUNCH_TIMEOUT_S = 240


@pytest.fixture(scope="module")
def ring_runs(tmp_path_factory):
    """launch(world): runs `world` ranks of ring_worker.py once per module (one process that
    imports torch once and forks the ranks, each initialised from the environment as under
    torchrun, on a free port); returns ({rank: {case: verdict}}, the output)."""
    cache_dir = tmp_path_factory.mktemp("ring-cache")     # shared: kernels compile once
    runs = {}

    def launch(world):
        if world in runs:
            return runs[world]
        out = tmp_path_factory.mktemp(f"ring-{world}")
        env = dict(os.environ, TESSEL_CACHE_DIR=str(cache_dir), OMP_NUM_THREADS="1")
        try:
            run = subprocess.run([sys.executable, str(HERE / "ring_worker.py"), str(out),
                                  "--world", str(world)], env=env, capture_output=True,
                                 text=True, timeout=LAUNCH_TIMEOUT_S)
            log = f"exit {run.returncode}\n{run.stdout}\n{run.stderr}"
        except subprocess.TimeoutExpired as e:
            log = f"killed after {LAUNCH_TIMEOUT_S} s\n{e.stdout}\n{e.stderr}"
        results = {}
        for rank in range(world):
            path = out / f"rank{rank}.json"
            results[rank] = json.loads(path.read_text()) if path.exists() else {}
        runs[world] = results, log
        return runs[world]
    return launch


def _verdicts(ring_runs, world, case):
    results, log = ring_runs(world)
    verdicts = [results[r].get(case) for r in range(world)]
    if any(v is None for v in verdicts):
        pytest.fail(f"case {case} did not report on every rank\n{log[-6000:]}")
    bad = [v["detail"] for v in verdicts if not v["ok"]]
    assert not bad, "\n".join(bad)


@needs_torch
@pytest.mark.parametrize("world", [2, 3, 4])
@pytest.mark.parametrize("case", CASES)
def test_ring_matches_whole_sequence(ring_runs, world, case):
    _verdicts(ring_runs, world, case)


@needs_torch
@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("case", MOD_CASES)
def test_ring_mods_see_global_positions(ring_runs, world, case):
    _verdicts(ring_runs, world, case)


@needs_torch
def test_ring_over_a_subgroup_of_four(ring_runs):
    results, log = ring_runs(4)
    verdicts = [results[r].get("subgroup") for r in range(4)]
    assert all(v is not None for v in verdicts), log[-6000:]
    bad = [v["detail"] for v in verdicts if not v["ok"]]
    assert not bad, "\n".join(bad)


# The helpers, on numpy -------------------------------------------------------------------------

@pytest.mark.parametrize("n, world", [(n, w) for n in (2, 7, 16, 23, 24, 40)
                                      for w in (1, 2, 3, 4) if n >= 2 * w])
def test_zigzag_round_trip(n, world):
    x = np.arange(2 * n * 3).reshape(2, n, 3)
    shards = [zigzag_shard(x, r, world, dim=1) for r in range(world)]
    assert np.array_equal(zigzag_unshard(shards, dim=1), x)
    sizes = split_sizes(n, 2 * world)
    for r, s in enumerate(shards):
        # chunk r then chunk 2W - 1 - r, in order
        first = x[:, sum(sizes[:r]):sum(sizes[:r + 1])]
        assert np.array_equal(s[:, :sizes[r]], first)
        assert s.shape[1] == sizes[r] + sizes[2 * world - 1 - r]
    if n % (2 * world) == 0:
        # Causal balance: every rank has the same number of (query, key <= query) pairs.
        chunk = n // (2 * world)
        work = {sum(i + 1 for c in (r, 2 * world - 1 - r)
                    for i in range(c * chunk, (c + 1) * chunk)) for r in range(world)}
        assert len(work) == 1


def test_zigzag_shard_of_four_ranks():
    x = np.arange(16)
    assert [list(zigzag_shard(x, r, 4, dim=0)) for r in range(4)] == [
        [0, 1, 14, 15], [2, 3, 12, 13], [4, 5, 10, 11], [6, 7, 8, 9]]


def test_zigzag_unshard_refuses_other_shards():
    x = np.arange(22)
    # 8, 7, 7 rows; zigzag shards of 22 rows have 7, 8, 7 (chunks of 4, 4, 4, 4, 3, 3)
    shards = [contiguous_shard(x, r, 3, dim=0) for r in range(3)]
    with pytest.raises(ValueError, match="zigzag shard"):
        zigzag_unshard(shards, dim=0)


def test_contiguous_shard_is_array_split():
    x = np.arange(23)
    for world in (1, 2, 3, 4):
        got = [contiguous_shard(x, r, world, dim=0) for r in range(world)]
        assert [list(g) for g in got] == [list(s) for s in np.array_split(x, world)]


def test_shard_checks_rank_and_dim():
    with pytest.raises(ValueError, match="rank 2 is not in a world of 2"):
        zigzag_shard(np.zeros(8), 2, 2, dim=0)
    with pytest.raises(ValueError, match="dim 3 out of range"):
        contiguous_shard(np.zeros((2, 8)), 0, 2, dim=3)


def test_ring_refuses_head_dim_zero_before_touching_the_group():
    torch = pytest.importorskip("torch")
    from tessel.distributed import ring_attention
    x = torch.zeros(1, 2, 8, 0)
    with pytest.raises(ValueError, match="head dim 0"):
        ring_attention(x, x, x)


# The merge program, on the interpreter ---------------------------------------------------------

def _attention64(q, k, v):
    s = q.astype(np.float64) @ k.astype(np.float64).swapaxes(-1, -2) / np.sqrt(q.shape[-1])
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    return (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64), \
        (m[..., 0] + np.log(p.sum(-1)))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_merge_of_key_blocks_is_the_whole_attention(dtype):
    import tessel
    from tessel.distributed import _merge
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 2, 37, 16)).astype(dtype) for _ in range(3))
    o_ref, lse_ref = _attention64(q, k, v)
    o_acc = np.zeros(q.shape, np.float32)
    lse_acc = np.full(q.shape[:3], -np.inf, np.float32)
    for a, b in ((0, 5), (5, 21), (21, 37)):
        o_i, lse_i = tessel.attention(q, k[:, :, a:b], v[:, :, a:b], return_lse=True)
        _merge(o_acc, lse_acc, o_i, lse_i, 0)
    tol = 1e-5 if dtype == np.float32 else 2e-3
    assert np.abs(o_acc - o_ref).max() < tol
    assert np.abs(lse_acc - lse_ref).max() < 1e-5


def test_merge_touches_only_its_rows_and_keeps_unseen_rows():
    from tessel.distributed import _merge
    rng = np.random.default_rng(1)
    o_acc = np.zeros((1, 2, 40, 16), np.float32)
    lse_acc = np.full((1, 2, 40), -np.inf, np.float32)
    o_part = rng.standard_normal((1, 2, 19, 16)).astype(np.float32)
    lse_part = rng.standard_normal((1, 2, 19)).astype(np.float32)
    lse_part[0, 1, 3] = -np.inf                      # a row that saw nothing
    o_part[0, 1, 3] = 0
    _merge(o_acc, lse_acc, o_part, lse_part, 7)
    assert np.array_equal(o_acc[:, :, 7:26], o_part)
    assert np.array_equal(lse_acc[:, :, 7:26], lse_part)
    assert not o_acc[:, :, :7].any() and not o_acc[:, :, 26:].any()
    assert np.isneginf(lse_acc[:, :, :7]).all() and np.isneginf(lse_acc[:, :, 26:]).all()
    assert not np.isnan(o_acc).any()


def test_merge_program_ir():
    """merge_partial is one DSL program: exp/log on f32 tiles, no loop."""
    o = np.zeros((1, 1, 32, 16), np.float32)
    lse = np.zeros((1, 1, 32), np.float32)
    k = merge_partial.warmup(o, lse, o.astype(np.float16), lse, 32, 32, 0, D=16, BLOCK_M=16)
    ir = k.asm["tile-opt"]
    assert "math.exp" in ir and "math.log" in ir and "scf.for" not in ir


# score_mod / mask_mod at global positions, on the interpreter -----------------------------------

def test_window_sees_only_pairs_within_the_window():
    # ring_attention(window_size=...) skips the shard pairs for which window_sees is False:
    # checked against every (query, key) position pair of two runs each.
    from tessel.distributed import _global_runs, window_sees
    assert _global_runs([(0, 10, 4), (4, 30, 3)], (2, 6)) == [(12, 2), (30, 2)]
    assert _global_runs([(0, 10, 4)], (4, 4)) == []
    rng = np.random.default_rng(3)
    for _ in range(300):
        qr = [(int(rng.integers(0, 40)), int(rng.integers(1, 6))) for _ in range(2)]
        kr = [(int(rng.integers(0, 40)), int(rng.integers(1, 6))) for _ in range(2)]
        window = (int(rng.integers(-1, 6)), int(rng.integers(-1, 6)))
        left, right = window
        want = any((left < 0 or ki >= qi - left) and (right < 0 or ki <= qi + right)
                   for a, n in qr for qi in range(a, a + n)
                   for c, m in kr for ki in range(c, c + m))
        assert window_sees(qr, kr, window) == want, (qr, kr, window)


def test_runs_at_maps_local_rows_to_global_positions():
    """_runs_at's (base, split, jump) gives every local row of a span its global position."""
    from tessel.distributed import _runs_at
    n, world = 23, 3
    sizes = split_sizes(n, 2 * world)
    starts = [sum(sizes[:i]) for i in range(2 * world)]
    for r in range(world):
        a, b = r, 2 * world - 1 - r
        pieces = [(0, starts[a], sizes[a]), (sizes[a], starts[b], sizes[b])]
        positions = list(range(starts[a], starts[a] + sizes[a])) + \
            list(range(starts[b], starts[b] + sizes[b]))
        m = len(positions)
        for lo in range(m):
            for hi in range(lo + 1, m + 1):
                base, split, jump = _runs_at(pieces, (lo, hi))
                got = [i + base + (jump if i >= split else 0) for i in range(hi - lo)]
                assert got == positions[lo:hi], (r, lo, hi)
    assert _runs_at([(0, 7, 5)], (1, 4)) == (8, 3, 0)


def _doc_mask(doc):
    def doc_mask(b, h, q_idx, kv_idx):
        return doc[q_idx] == doc[kv_idx]
    return doc_mask


def _distance_bias(score, b, h, q_idx, kv_idx):
    return score + 0.25 * (kv_idx - q_idx).to(tl.float32)


def test_global_mods_read_each_calls_tensors_without_retracing():
    """The wrappers ring_attention puts around the user's mods, on numpy: a document mask that
    captures its ids (held by the user's closure, inside the wrapper's) and a distance bias,
    on rows of a zigzag-like shard (two runs), see global positions; the second call with
    other ids and offsets reads them (the nested capture is found through the wrapper) and
    traces nothing."""
    from tessel.attention import _as_jit, attention_kernel
    from tessel.distributed import _GlobalMods, _runs_at
    from tessel.reference import max_rel_error, reference_attention
    rng = np.random.default_rng(3)
    N = 30
    q, k, v = (rng.standard_normal((1, 2, N, 16)).astype(np.float32) for _ in range(3))
    traces = []
    for seed, (qa, qb), (ka, kb) in ((0, (3, 9), (20, 27)), (1, (0, 6), (11, 20))):
        doc = np.sort(np.random.default_rng(seed).integers(0, 4, N)).astype(np.int32)
        q_rows = np.r_[qa:qb, 25:30]                 # two runs of the sequence
        k_rows = np.r_[ka:kb]
        off = np.array(_runs_at([(0, qa, qb - qa), (qb - qa, 25, 5)], (0, len(q_rows)))
                       + _runs_at([(0, ka, kb - ka)], (0, len(k_rows))), np.int32)
        mods = _GlobalMods(_as_jit(_distance_bias, "score_mod"),
                           _as_jit(_doc_mask(doc), "mask_mod"))
        sm, mm = mods.at(off)
        before = sum(len(c) for c in attention_kernel.cache.values())
        o, lse = tessel_attention(q[:, :, q_rows], k[:, :, k_rows], v[:, :, k_rows],
                                  score_mod=sm, mask_mod=mm, return_lse=True)
        traces.append(sum(len(c) for c in attention_kernel.cache.values()) - before)
        ref, ref_lse = reference_attention(
            q[:, :, q_rows], k[:, :, k_rows], v[:, :, k_rows],
            score=lambda s, b, h, qi, ki: s + 0.25 * (k_rows[ki] - q_rows[qi]),
            allowed=lambda b, h, qi, ki: doc[q_rows[qi]] == doc[k_rows[ki]])
        assert max_rel_error(o, ref) < 1e-5
        seen = np.isfinite(ref_lse)
        assert (np.isfinite(lse) == seen).all() and not np.isnan(o).any()
        assert np.abs(lse[seen] - ref_lse[seen]).max() < 1e-5
    assert traces[1] == 0, traces


def tessel_attention(*args, **kwargs):
    import tessel
    return tessel.attention(*args, **kwargs)


@needs_ptxas()
def test_global_mods_compile_for_the_gpu(tmp_path, monkeypatch):
    """The ring's kernels with mods (the offsets a captured tensor) compile for the GPU here, no
    GPU needed (sm_80: ~3 s of ptxas and LLVM a program here): the forward at the gather
    blocks (codegen=auto takes the reference lowering), and the backward's dQ program (the
    score_mod's chain rule) at its GPU blocks."""
    import tessel
    import tessel.cache
    from tessel.attention import _as_jit, gather_blocks
    from tessel.backward import compile_attention_backward, gpu_backward_blocks
    from tessel.distributed import _GlobalMods
    monkeypatch.setenv("TESSEL_CACHE_DIR", str(tmp_path))
    q = np.zeros((1, 2, 256, 64), np.float16)
    mods = _GlobalMods(_as_jit(_distance_bias, "score_mod"),
                       _as_jit(_doc_mask(np.zeros(256, np.int32)), "mask_mod"))
    sm, mm = mods.at(np.zeros(6, np.int32))
    bm, bn = gather_blocks(64)
    k = tessel.compile_attention(q, q, q, causal=True, score_mod=sm, mask_mod=mm, block_m=bm,
                                 block_n=bn)
    binary = k.binary(tessel.cache.GpuOptions(chip="sm_80", codegen="auto"))
    assert binary.cubin and binary.dynamic_shared_bytes <= 163 * 1024
    bm, bn = gpu_backward_blocks(64, "f16")
    programs = compile_attention_backward(q, q, q, causal=True, score_mod=sm, mask_mod=mm,
                                          block_m=bm, block_n=bn)
    binary = programs["dq"].binary(tessel.cache.GpuOptions(chip="sm_80"))
    assert binary.cubin and binary.dynamic_shared_bytes <= 163 * 1024
