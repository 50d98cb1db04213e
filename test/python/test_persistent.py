"""Persistent attention kernels (grid.persistent_programs; docs/dev/codegen-wgmma.md,
"Persistent kernels"): one program an SM walks the (query block, batch·head) tiles in a tile
loop. On the interpreter, any number of programs gives the one-program-a-tile kernel's output
bit for bit; compiled for sm_90a, the 128x128 kernels keep warp specialization and the
overlapped consumers with the tile loop around them (ptxas: no spill)."""
import importlib

import numpy as np
import pytest

from dsl_helpers import BUILD  # noqa: F401 (puts the build's package on the path)
import tessel
from tessel import blocksparse, cache, grid
from tessel.attention import attention_kernel, persistent_attention_kernel

from attention_kernels import reference_attention


def _qkv(B, H, Hkv, N, D, seed):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((B, H, N, D)).astype(np.float16)
    k, v = (rng.standard_normal((B, Hkv, N, D)).astype(np.float16) for _ in range(2))
    return q, k, v


def _dense(kernel, grid, q, k, v, causal, extra=()):
    B, H, N, D = q.shape
    o = np.zeros_like(q)
    lse = np.zeros((B, H, N), np.float32)
    kernel[grid](q, k, v, o, lse, N, k.shape[2], H, k.shape[1], 1.0 / np.sqrt(D), *extra, D=D,
                 BLOCK_M=64, BLOCK_N=64, CAUSAL=causal, SCORE_MOD=None, MASK_MOD=None)
    return o, lse


@pytest.mark.parametrize("programs", [1, 3, 100])
@pytest.mark.parametrize("causal", [False, True])
def test_persistent_dense_matches_one_program_a_tile(causal, programs):
    B, H, Hkv, N, D = 2, 4, 2, 200, 64           # 4 query blocks (the last ragged), GQA
    q, k, v = _qkv(B, H, Hkv, N, D, seed=programs)
    want_o, want_lse = _dense(attention_kernel, (4, B * H, 1), q, k, v, causal)
    costs = np.tile(np.arange(4, 0, -1) if causal else np.ones(4), B * H)
    tiles, starts = grid.greedy_schedule(costs, programs)
    o, lse = _dense(persistent_attention_kernel, (programs, 1, 1), q, k, v, causal,
                    (B * H, tiles, starts))
    np.testing.assert_array_equal(o, want_o)
    np.testing.assert_array_equal(lse, want_lse)
    ref, ref_lse = reference_attention(q, k, v, 1.0 / np.sqrt(D), "causal" if causal else "none")
    np.testing.assert_allclose(o.astype(np.float64), ref, atol=2e-3, rtol=0)
    np.testing.assert_allclose(lse, ref_lse, rtol=1e-4)


def test_greedy_schedule():
    # Equal costs: round-robin, each program's tiles in launch order.
    tiles, starts = grid.greedy_schedule(np.ones(10), 4)
    assert starts.tolist() == [0, 3, 6, 8, 10]
    assert tiles.tolist() == [0, 4, 8, 1, 5, 9, 2, 6, 3, 7]
    # Uneven costs (causal rows, longest first): each tile goes to the program free first;
    # the busiest program ends no later than round-robin's would.
    costs = np.tile(np.arange(16, 0, -1), 8) + 1.0
    tiles, starts = grid.greedy_schedule(costs, 12)
    assert sorted(tiles.tolist()) == list(range(len(costs)))
    loads = [costs[tiles[starts[p]:starts[p + 1]]].sum() for p in range(12)]
    robin = [costs[p::12].sum() for p in range(12)]
    assert max(loads) < max(robin) and max(loads) - min(loads) <= costs.max()
    for p in range(12):
        mine = tiles[starts[p]:starts[p + 1]]
        assert (np.diff(mine) > 0).all()                 # in launch order


def test_greedy_schedule_by_rounds(monkeypatch):
    # Past GREEDY_MAX_TILES: rounds of `programs` tiles, the costliest to the least loaded.
    monkeypatch.setattr(grid, "GREEDY_MAX_TILES", 64)
    costs = np.tile(np.arange(16, 0, -1), 16) + 1.0       # 256 tiles, causal rows of 16 blocks
    tiles, starts = grid.greedy_schedule(costs, 12)
    assert sorted(tiles.tolist()) == list(range(len(costs)))
    loads = [costs[tiles[starts[p]:starts[p + 1]]].sum() for p in range(12)]
    assert max(loads) - min(loads) <= costs.max()
    for p in range(12):
        assert (np.diff(tiles[starts[p]:starts[p + 1]]) > 0).all()


def window(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx < 100)


@pytest.mark.parametrize("programs", [1, 5])
def test_persistent_block_sparse_matches_one_program_a_tile(programs):
    B, H, N, D = 2, 3, 300, 64
    q, k, v = _qkv(B, H, H, N, D, seed=7)
    bm = tessel.block_mask(window, None, None, N, N, BLOCK_M=64, BLOCK_N=64)
    args, cx, grid, o, lse = blocksparse.prepare(q, k, v, None, None, window, False, bm, None,
                                                 None, False)
    assert not cx["PERSISTENT"]                  # numpy: one program a tile
    blocksparse.block_sparse_attention_kernel[grid](*args, **cx)
    want_o, want_lse = o.copy(), lse.copy()
    o[...] = 0
    lse[...] = 0
    tiles, starts = bm.schedule(B, H, cx["BLOCK_M"], programs)
    assert sorted(tiles.tolist()) == list(range(B * H * 5))      # every tile once
    assert starts[0] == 0 and starts[-1] == B * H * 5 and len(starts) == programs + 1
    args = args[:9] + (tiles, starts) + args[11:]
    blocksparse.block_sparse_attention_kernel[(programs, 1, 1)](*args, **dict(cx,
                                                                              PERSISTENT=True))
    np.testing.assert_array_equal(o, want_o)
    np.testing.assert_array_equal(lse, want_lse)


def _ptx(tmp_path, kernel, **options):
    try:
        cache.ptxas_version()
    except tessel.CompilationError as e:
        pytest.skip(str(e))
    return cache.get_binary(kernel, cache.GpuOptions(chip="sm_90a", **options),
                            directory=str(tmp_path))


@pytest.mark.parametrize("causal", [False, True])
def test_persistent_128_blocks_stay_warp_specialized(tmp_path, causal):
    B, H, N, D = 1, 2, 1000, 128
    x = np.zeros((B, H, N, D), np.float16)
    lse = np.zeros((B, H, N), np.float32)
    ids = np.zeros(8, np.int32)
    k = persistent_attention_kernel.warmup(x, x, x, x, lse, N, N, H, H, 0.1, B * H, ids, ids,
                                           D=D, BLOCK_M=128, BLOCK_N=128, CAUSAL=causal,
                                           SCORE_MOD=None, MASK_MOD=None)
    assert "tilegpu.tile_loop" not in k.asm["tile-opt"]   # marked by the GPU level, not before
    b = _ptx(tmp_path, k)
    # Two consumer warpgroups and a producer warpgroup that gives its registers away.
    assert b.manifest["block"][0] == 384 and "setmaxnreg" in b.ptx, b.manifest
    assert "wgmma.mma_async" in b.ptx
    assert "wgmma.wait_group.sync.aligned 1" in b.ptx   # the consumers' overlapped dots
    assert b.manifest.get("spill_bytes", 0) == 0, b.manifest


def test_persistent_block_sparse_128_blocks_stay_warp_specialized(tmp_path):
    N, D = 1024, 128
    x = np.zeros((1, 2, N, D), np.float16)
    bm = tessel.block_mask(window, None, None, N, N, BLOCK_M=128, BLOCK_N=128)
    args, cx, _, _, _ = blocksparse.prepare(x, x, x, None, None, window, False, bm, 128, 128,
                                            False)
    b = _ptx(tmp_path, blocksparse.block_sparse_attention_kernel.warmup(
        *args, **dict(cx, PERSISTENT=True)))
    assert b.manifest["block"][0] == 384 and "setmaxnreg" in b.ptx, b.manifest
    assert b.manifest.get("spill_bytes", 0) == 0, b.manifest


def _dense_kernel(causal, N=1024, D=128, BM=128, BN=128, **key_loops):
    """The persistent kernel at head dim D and BM x BN blocks, warmed up for N rows, 2 heads
    (by default d128's 128x128 kernel for 1024 rows); key_loops: EVEN_N=True etc."""
    x = np.zeros((1, 2, N, D), np.float16)
    lse = np.zeros((1, 2, N), np.float32)
    ids = np.zeros(8, np.int32)
    return persistent_attention_kernel.warmup(x, x, x, x, lse, N, N, 2, 2, 0.1, 2, ids, ids,
                                              D=D, BLOCK_M=BM, BLOCK_N=BN, CAUSAL=causal,
                                              SCORE_MOD=None, MASK_MOD=None, **key_loops)


@pytest.mark.parametrize("once", [False, True], ids=["", "Q from the producer"])
def test_synchronous_consumers_read_q_by_descriptor(tmp_path, once):
    # Warp-specialized consumers read the Q block by descriptor where one key loop reads it
    # all, overlapped or not. Kept in registers by synchronous consumers (FP8's default,
    # overlap_consumers=False), ptxas 13.0 gave Q's registers to P inside the one key loop of
    # d128 128x128 (EVEN_N): every S after the first was P·Kᵀ, wrong results on the H100
    # (s37). No ldmatrix is left there. The split kernel's synchronous consumers keep Q in
    # registers (read in two loops; its descriptors' uniform registers made block-mask
    # kernels spill), the overlapped ones read it by descriptor.
    for even in (True, False):
        k = _dense_kernel(causal=False, EVEN_N=even)
        for overlap in (True, False):
            b = _ptx(tmp_path, k, overlap_consumers=overlap, producer_once=once)
            assert ("ldmatrix" in b.ptx) == (not even and not overlap), (even, overlap)
            assert b.manifest["spill_bytes"] == 0 and b.manifest["given_up"] == [], b.manifest


@pytest.mark.parametrize("D,BN,even,by_descriptor", [
    (64, 64, True, True), (64, 64, False, False), (128, 64, True, False), (64, 32, True, False)],
    ids=["d64-64-one-loop", "d64-64-two-loops", "d128-64-one-loop", "d64-32-one-loop"])
def test_one_warpgroup_reads_q_of_p_width_by_descriptor(tmp_path, D, BN, even, by_descriptor):
    # The same ptxas 13.0 fault without warp specialization (forty-third session, H100): the
    # one-warpgroup kernel at d64 with 64-key blocks and whole key blocks (EVEN_N: one key
    # loop) kept Q's wgmma A fragments in registers beside a P of the same width, and every S
    # after the first read P (0.8 relative error; d128 64x64, d64 64x32 and the two-loop form
    # were right). tilegpu's plan reads such a Q by descriptor (LoadSlot::byDescriptor): no
    # ldmatrix left, Q's bytes its own; the others keep Q in registers. No spill either way.
    x = np.zeros((1, 2, 256, D), np.float16)
    lse = np.zeros((1, 2, 256), np.float32)
    k = attention_kernel.warmup(x, x, x, x, lse, 256, 256, 2, 2, 0.1, D=D, BLOCK_M=64,
                                BLOCK_N=BN, CAUSAL=False, SCORE_MOD=None, MASK_MOD=None,
                                EVEN_N=even)
    b = _ptx(tmp_path, k)
    assert b.manifest["block"][0] == 128 and "wgmma.mma_async" in b.ptx, b.manifest
    assert ("ldmatrix" in b.ptx) != by_descriptor
    assert b.manifest["spill_bytes"] == 0, b.manifest


def test_producer_once_compiles(tmp_path):
    # GpuOptions(producer_once=True) (off by default): the producer copies Q too — one more
    # cp.async.mbarrier.arrive in the PTX (its once_full), still no spill; a key of its own.
    k = _dense_kernel(causal=True)
    plain, once = _ptx(tmp_path, k), _ptx(tmp_path, k, producer_once=True)
    arrives = [b.ptx.count("cp.async.mbarrier.arrive") for b in (plain, once)]
    assert arrives[1] == arrives[0] + 1, arrives
    assert once.manifest["spill_bytes"] == 0 and once.key != plain.key


def test_tma_producer_compiles(tmp_path):
    # GpuOptions(tma_producer), on by default: the producer's K, V and (with
    # producer_once) Q copies through TMA — a map build and two boxes (64-column slabs) each,
    # PTX ISA 8.3, the maps' records and images past the shared memory; a key of its own. The
    # build has no branch inside the warp around its `.sync.aligned` fence (the H200 hung when
    # lane 0 had its own copy): one fence a copy site, as many as the map builds. The maps have
    # three dimensions, the third the descriptor's head (rank field 2), so that one map serves
    # every head of the tensor (not rebuilt at every tile).
    k = _dense_kernel(causal=False)
    once = _ptx(tmp_path, k, producer_once=True, tma_producer=False)
    tma = _ptx(tmp_path, k, producer_once=True)
    assert "cp.async.bulk.tensor" not in once.ptx and ".version 8.3" in tma.ptx
    sites = tma.ptx.count("@p tensormap.replace.tile.global_address")
    assert sites >= 3, sites                         # Q once, K and V in each key loop
    assert tma.ptx.count("tensormap.cp_fenceproxy") == sites
    assert tma.ptx.count("cp.async.bulk.tensor.3d") == 2 * sites
    assert tma.ptx.count("tensormap.replace.tile.rank.shared::cta.b1024.b32") == sites
    assert "tensormap.replace.tile.box_dim.shared::cta.b1024.b32" in tma.ptx
    assert tma.ptx.count("mbarrier.expect_tx") == sites
    assert "cp.async.cg.shared.global" in tma.ptx     # the copies TMA cannot make at run time
    assert tma.manifest["dynamic_shared_bytes"] > once.manifest["dynamic_shared_bytes"]
    assert tma.manifest["spill_bytes"] == 0 and tma.key != once.key


@pytest.mark.parametrize("D,BM,causal", [(128, 128, False), (128, 128, True), (64, 192, True)])
def test_pipeline_tiles_compiles(tmp_path, D, BM, causal):
    # GpuOptions(pipeline_tiles) (off by default; tilegpu-pipeline-tiles): with Q from the
    # producer, each tile's first S = Q·K₀ᵀ is issued before the tile loop or at the end of the
    # tile before. d128's overlapped consumers: two issue sites of 8 wgmma k steps, the peel's
    # S gone (+8); d64's synchronous 192-row consumers get their first loop peeled: two issue
    # sites of 4, the peel's P·V of 8 (+16). No spill, nothing given up, a key of its own;
    # without Q from the producer the option changes nothing but the key.
    k = _dense_kernel(causal, N=2048, D=D, BM=BM)
    once = _ptx(tmp_path, k, producer_once=True)
    piped = _ptx(tmp_path, k, producer_once=True, pipeline_tiles=True)
    steps = [b.ptx.count("wgmma.mma_async") for b in (once, piped)]
    assert steps[1] - steps[0] == (8 if D == 128 else 16), steps
    assert piped.manifest["spill_bytes"] == 0 and piped.manifest["given_up"] == []
    assert piped.key != once.key
    plain = _ptx(tmp_path, k)
    alone = _ptx(tmp_path, k, pipeline_tiles=True)
    assert alone.ptx == plain.ptx and alone.key != plain.key
    assert k.key_ingredients(cache.GpuOptions(chip="sm_90a", pipeline_tiles=True))[
        "options"]["target"].endswith(";pipeline-tiles")
    with pytest.raises(TypeError, match="pipeline_tiles must be a bool"):
        cache.GpuOptions(pipeline_tiles=1)


@pytest.mark.parametrize("causal", [False, True])
def test_late_p_compiles(tmp_path, causal):
    # GpuOptions(late_p) (off by default): d64's 192x128 consumers, whose registers (152 beside
    # a 56-register producer) cannot hold S_j, O and two P tiles, are overlapped with P_j made
    # after the previous P·V's wait at 160 registers, the cp.async producer keeping 32 — one
    # group in flight at each S wait, no spill. A TMA producer (the default) keeps its
    # registers: then nothing changes but the key.
    N, D = 2048, 64
    x = np.zeros((1, 2, N, D), np.float16)
    lse = np.zeros((1, 2, N), np.float32)
    ids = np.zeros(8, np.int32)
    k = persistent_attention_kernel.warmup(x, x, x, x, lse, N, N, 2, 2, 0.1, 2, ids, ids, D=D,
                                           BLOCK_M=192, BLOCK_N=128, CAUSAL=causal,
                                           SCORE_MOD=None, MASK_MOD=None)
    sync = _ptx(tmp_path, k, tma_producer=False)
    late = _ptx(tmp_path, k, tma_producer=False, late_p=True)
    assert "wgmma.wait_group.sync.aligned 1;" not in sync.ptx
    assert "wgmma.wait_group.sync.aligned 1;" in late.ptx
    words = " ".join(late.ptx.split())
    assert "setmaxnreg.inc.sync.aligned.u32 160;" in words
    assert "setmaxnreg.dec.sync.aligned.u32 32;" in words
    assert late.manifest["spill_bytes"] == 0 and late.manifest["given_up"] == []
    plain, tma = _ptx(tmp_path, k), _ptx(tmp_path, k, late_p=True)
    assert tma.ptx == plain.ptx and tma.key != plain.key
    with pytest.raises(TypeError, match="late_p must be a bool"):
        cache.GpuOptions(late_p="yes")


def test_producer_once_policy(monkeypatch):
    # grid.short_tiles: the dense persistent kernel copies Q from the producer where its tiles
    # visit at most PRODUCER_ONCE_MAX_BLOCKS key blocks on average (causal rows: half).
    att = importlib.import_module("tessel.attention")   # the module (tessel.attention: a function)
    once, plain = att._persistent_once, persistent_attention_kernel
    assert once.options.producer_once and once.options.gpu_options("sm_90a").producer_once
    assert plain.options.gpu_options("sm_90a").producer_once is False
    assert att.persistent_kernel(1024, 1024, 128, 128, 128, False) is once
    assert att.persistent_kernel(2048, 2048, 128, 128, 128, False) is once
    assert att.persistent_kernel(4096, 4096, 128, 128, 128, False) is plain
    assert att.persistent_kernel(2048, 2048, 128, 128, 128, True) is once      # 8.5 blocks a tile
    assert att.persistent_kernel(4096, 4096, 128, 128, 128, True) is plain     # 16.5
    assert att.persistent_kernel(1024, 1024, 256, 128, 64, False) is plain   # d256: spills
    # d64 blocks of 128 keys are half a d128 block's work: twice as many (32) a tile.
    assert att.persistent_kernel(4096, 4096, 64, 192, 128, True) is once      # 16.5
    assert att.persistent_kernel(4096, 4096, 64, 192, 128, False) is once     # 32
    assert att.persistent_kernel(8192, 8192, 64, 192, 128, True) is plain     # 32.5
    monkeypatch.setattr(grid, "PRODUCER_ONCE_GPU", False)
    assert att.persistent_kernel(1024, 1024, 128, 128, 128, False) is plain


def test_schedule_switches_policy(monkeypatch):
    # grid.PIPELINE_TILES_GPU and grid.LATE_P_GPU (off until measured) choose the persistent
    # kernel's variants: pipelined tiles where Q comes from the producer, FA3's d64 schedule
    # for the 192-row kernel; one kernel object per variant, made once.
    att = importlib.import_module("tessel.attention")
    plain, once = persistent_attention_kernel, att._persistent_once
    assert att.persistent_kernel(8192, 8192, 64, 192, 128, False) is plain
    monkeypatch.setattr(grid, "PIPELINE_TILES_GPU", True)
    piped = att.persistent_kernel(1024, 1024, 128, 128, 128, False)
    assert piped is not once and piped is att.persistent_kernel(2048, 2048, 128, 128, 128, False)
    gpu = piped.options.gpu_options("sm_90a")
    assert gpu.producer_once and gpu.pipeline_tiles and not gpu.late_p
    assert att.persistent_kernel(4096, 4096, 128, 128, 128, False) is plain   # long tiles
    monkeypatch.setattr(grid, "LATE_P_GPU", True)
    late = att.persistent_kernel(8192, 8192, 64, 192, 128, False).options.gpu_options("sm_90a")
    assert late.late_p and not late.tma_producer and not late.producer_once
    assert att.persistent_kernel(4096, 4096, 128, 128, 128, False) is plain   # 128 rows


def test_producer_once_policy_block_mask():
    # A block mask's tiles: its mean visited blocks (window 1024 at 8k: ~9; causal: ~32).
    N = 8192

    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    short = tessel.block_mask(window_1024, None, None, N, N, BLOCK_M=128, BLOCK_N=128)
    long = tessel.block_mask(causal, None, None, N, N, BLOCK_M=128, BLOCK_N=128)
    assert 8 <= short.mean_blocks(2, 4, 128, 132) <= 10
    assert 32 <= long.mean_blocks(2, 4, 128, 132) <= 33
    q = np.zeros((2, 4, N, 128), np.float16)
    cx = dict(PERSISTENT=True, D=128, BLOCK_M=128, BLOCK_N=128)
    assert blocksparse.kernel_of(short, (q,), cx, (132, 1, 1)) is blocksparse._block_sparse_once
    assert blocksparse.kernel_of(long, (q,), cx, (132, 1, 1)) is \
        blocksparse.block_sparse_attention_kernel
    assert blocksparse.kernel_of(short, (q,), dict(cx, PERSISTENT=False), (64, 8)) is \
        blocksparse.block_sparse_attention_kernel


def window_1024(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx < 1024)


@pytest.mark.parametrize("name", ["producer_once", "tma_producer", "pipeline_tiles", "late_p",
                                  "fp8_overlap"])
def test_compile_options_switches(name):
    # A kernel's own schedule switches (kernel.with_options(...)) set the GpuOptions field of
    # the same name; None keeps GpuOptions' default.
    default = getattr(cache.GpuOptions(), name)
    gpu = tessel.CompileOptions(**{name: not default}).gpu_options("sm_90a")
    assert getattr(gpu, name) is (not default)
    assert getattr(tessel.CompileOptions().gpu_options("sm_90a"), name) is default
    with pytest.raises(TypeError, match=f"{name} must be a bool"):
        tessel.CompileOptions(**{name: 1})


@pytest.mark.parametrize("D,BM,causal", [(128, 128, False), (128, 128, True), (64, 192, False)])
def test_fuse_masked_loops_compiles(tmp_path, D, BM, causal):
    # GpuOptions(fuse_masked_loops) (off by default; tilegpu-fuse-masked-loops): the unmasked
    # loop and the masked one after it (the key tail, the diagonal) as one loop, so the
    # consumers' loop pipeline is there once: half the wgmma instructions, still no spill,
    # nothing given up, a key of its own. Even with Q from the producer and pipelined tiles.
    # Against the split with both its loops overlapped (sync_masked_loops off).
    k = _dense_kernel(causal, N=2000, D=D, BM=BM)
    plain = _ptx(tmp_path, k, sync_masked_loops=False)
    fused = _ptx(tmp_path, k, fuse_masked_loops=True)
    steps = [b.ptx.count("wgmma.mma_async") for b in (plain, fused)]
    assert steps[0] == 2 * steps[1], steps
    assert fused.manifest["spill_bytes"] == 0 and fused.manifest["given_up"] == []
    assert fused.key != plain.key
    piped = _ptx(tmp_path, k, fuse_masked_loops=True, producer_once=True, pipeline_tiles=True)
    assert piped.manifest["spill_bytes"] == 0 and piped.manifest["given_up"] == []
    assert k.key_ingredients(cache.GpuOptions(chip="sm_90a", fuse_masked_loops=True))[
        "options"]["target"].endswith(";fuse-masked-loops")
    with pytest.raises(TypeError, match="fuse_masked_loops must be a bool"):
        cache.GpuOptions(fuse_masked_loops=1)


@pytest.mark.parametrize("D,BM,BN,causal", [(128, 128, 128, False), (128, 128, 128, True),
                                            (64, 192, 128, True), (256, 128, 64, True)])
def test_sync_masked_loops_compiles(tmp_path, D, BM, BN, causal):
    # GpuOptions(sync_masked_loops) (on by default; tilegpu-overlap-consumers
    # masked-synchronous): the split's masked loop (the key tail, the diagonal) is left
    # synchronous, so d128's overlapped consumers lose that loop's peel and drain (64 -> 48
    # wgmma), d256's 128x64 ones too (80 -> 60: its O takes 128 registers a thread, and the
    # synchronous copy once spilled beside it); d64's 192-row consumers are synchronous anyway
    # (unchanged). No spill, nothing given up, a key of its own.
    k = _dense_kernel(causal, N=2000, D=D, BM=BM, BN=BN)
    overlapped, sync = _ptx(tmp_path, k, sync_masked_loops=False), _ptx(tmp_path, k)
    steps = [b.ptx.count("wgmma.mma_async") for b in (overlapped, sync)]
    want = {128: [64, 48], 256: [80, 60]}.get(D, [steps[0], steps[0]])
    assert steps == want, steps
    assert sync.manifest["spill_bytes"] == 0 and sync.manifest["given_up"] == []
    assert sync.key != overlapped.key
    assert k.key_ingredients(cache.GpuOptions(chip="sm_90a", sync_masked_loops=False))[
        "options"]["target"].endswith(";no-sync-masked-loops")
    with pytest.raises(TypeError, match="sync_masked_loops must be a bool"):
        cache.GpuOptions(sync_masked_loops=1)


@pytest.mark.parametrize("D,BM,BN,align,given_up", [(64, 192, 128, False, []),
                                                    (64, 192, 128, True, []),
                                                    (128, 128, 128, False, []),
                                                    (256, 128, 64, False,
                                                     ["skip-masked-warpgroups"])])
def test_skip_masked_warpgroups_compiles(tmp_path, D, BM, BN, align, given_up):
    # GpuOptions(skip_masked_warpgroups) (off by default; tilegpu-skip-masked-warpgroups): the
    # causal masked loop's step under a branch on the warpgroup's rows — the same dots (no
    # wgmma more or less), a kernel of its own, no spill. d256's O (128 registers a thread)
    # spilled across the branch's join, so the spill fallbacks give the switch up there.
    k = _dense_kernel(True, N=4096, D=D, BM=BM, BN=BN, ALIGN_END=align)
    plain, skip = _ptx(tmp_path, k), _ptx(tmp_path, k, skip_masked_warpgroups=True)
    assert skip.manifest["spill_bytes"] == 0 and skip.manifest["given_up"] == given_up
    assert skip.ptx.count("wgmma.mma_async") == plain.ptx.count("wgmma.mma_async")
    assert (skip.ptx != plain.ptx) == (not given_up) and skip.key != plain.key
    assert k.key_ingredients(cache.GpuOptions(chip="sm_90a", skip_masked_warpgroups=True))[
        "options"]["target"].endswith(";skip-masked-warpgroups")
    with pytest.raises(TypeError, match="skip_masked_warpgroups must be a bool"):
        cache.GpuOptions(skip_masked_warpgroups=1)


@pytest.mark.parametrize("causal,once", [(False, False), (True, False), (False, True)])
def test_drop_tma_fences_compiles(tmp_path, causal, once):
    # GpuOptions(drop_tma_fences) (on by default; tilegpu-drop-tma-fences): with tma_only,
    # the consumers' fence.proxy.async after each wait for K and V goes. Q's one stays: after
    # the consumers' own cp.async copy, or, with Q from the producer, the lowering's fence and
    # barrier where it reads an A block from shared memory. Same wgmma and TMA copies, no
    # spill, nothing given up, a key of its own; without tma_only nothing changes.
    k = _dense_kernel(causal, N=2000)
    switches = dict(tma_only=True, producer_once=once)
    kept, dropped = _ptx(tmp_path, k, drop_tma_fences=False, **switches), _ptx(tmp_path, k,
                                                                               **switches)
    fences = [b.ptx.count("fence.proxy.async.shared::cta") for b in (kept, dropped)]
    assert fences[0] > fences[1] == 1, fences
    for what in ("wgmma.mma_async", "cp.async.bulk.tensor", "mbarrier.try_wait"):
        assert kept.ptx.count(what) == dropped.ptx.count(what), what
    assert dropped.manifest["spill_bytes"] == 0 and dropped.manifest["given_up"] == []
    assert dropped.key != kept.key
    checked = _ptx(tmp_path, k, producer_once=once)
    assert checked.ptx.count("fence.proxy.async.shared::cta") == \
        _ptx(tmp_path, k, drop_tma_fences=False, producer_once=once).ptx.count(
            "fence.proxy.async.shared::cta")
    assert k.key_ingredients(cache.GpuOptions(chip="sm_90a", drop_tma_fences=False))[
        "options"]["target"].endswith(";no-drop-tma-fences")
    with pytest.raises(TypeError, match="drop_tma_fences must be a bool"):
        cache.GpuOptions(drop_tma_fences=1)


def test_attention_kernels_take_tma_without_the_check(tmp_path):
    # tessel.attention's dense and block-sparse kernels read 16-byte aligned tensors with 16-byte
    # aligned row strides (layouts.in_place / contiguous_aligned), so they compile with
    # GpuOptions.tma_only (layouts.ALIGNED_INPUTS): the producer's TMA copies without the
    # run-time check of what TMA needs and the cp.async copy beside it — the same TMA copies,
    # 64 fewer cp.async at d128 128x128, nothing spilled.
    for kernel in (attention_kernel, persistent_attention_kernel,
                   blocksparse.block_sparse_attention_kernel):
        assert kernel.options.gpu_options("sm_90a").tma_only
    att = importlib.import_module("tessel.attention")
    assert att.persistent_kernel(1024, 1024, 128, 128, 128, False).options.tma_only
    N = 1000
    x = np.zeros((1, 2, N, 128), np.float16)
    lse = np.zeros((1, 2, N), np.float32)
    ids = np.zeros(8, np.int32)
    k = persistent_attention_kernel.warmup(x, x, x, x, lse, N, N, 2, 2, 0.1, 2, ids, ids, D=128,
                                           BLOCK_M=128, BLOCK_N=128, CAUSAL=False,
                                           SCORE_MOD=None, MASK_MOD=None, TAIL_FIRST=True)
    checked, only = _ptx(tmp_path, k, tma_only=False), _ptx(tmp_path, k, tma_only=True)
    bulk = "cp.async.bulk.tensor.3d"
    assert only.ptx.count(bulk) == checked.ptx.count(bulk) > 0
    assert checked.ptx.count("cp.async.cg.") - only.ptx.count("cp.async.cg.") == 64
    assert only.manifest["spill_bytes"] == 0 and only.manifest["given_up"] == []
    with pytest.raises(TypeError, match="tma_only must be a bool"):
        cache.GpuOptions(tma_only=1)
    with pytest.raises(TypeError, match="tma_only must be a bool"):
        tessel.CompileOptions(tma_only="yes")
