"""attention_with_kvcache's k=, v= (python/tessel/kvcache_append.py) on the interpreter: the new
rows land where FlashAttention's flash_attn_with_kvcache puts them (contiguous and paged caches,
pages in any order, rows crossing pages), nothing else in the cache changes, and the attention
is the one over the cache with those rows and cache_seqlens + Sk keys; bad calls are refused."""
import numpy as np
import pytest

from dsl_helpers import needs_ptxas  # (puts the build's package on the path)
import tessel

B, HKV, H, D = 3, 2, 4, 32


def _rows(rng, *shape):
    return rng.standard_normal(shape).astype(np.float16)


def _expected(cache, new, seqlens, table=None):
    """cache with sequence b's new rows at positions seqlens[b]... (through table when paged)."""
    out = cache.copy()
    page = cache.shape[1]
    for b in range(new.shape[0]):
        for i in range(new.shape[1]):
            pos = int(seqlens[b]) + i
            if table is None:
                out[b, pos] = new[b, i]
            else:
                out[table[b, pos // page], pos % page] = new[b, i]
    return out


@pytest.mark.parametrize("Sq,Sk", [(1, 1), (5, 5), (3, 40)], ids=["decode", "chunk", "prefill"])
@pytest.mark.parametrize("paged", [False, True], ids=["contiguous", "paged"])
def test_new_rows_are_written_then_attended(paged, Sq, Sk):
    rng = np.random.default_rng(Sq * 10 + Sk + paged)
    seqlens = np.array([0, 37, 60], np.int32)
    if paged:
        page, pages_each = 16, 7                  # capacity 112 a sequence
        num_pages = B * pages_each + 3
        table = rng.permutation(num_pages)[:B * pages_each].reshape(B, pages_each)
        table = table.astype(np.int32)
        kc, vc = (_rows(rng, num_pages, page, HKV, D) for _ in range(2))
    else:
        table = None
        kc, vc = (_rows(rng, B, 112, HKV, D) for _ in range(2))
    kn, vn = (_rows(rng, B, Sk, HKV, D) for _ in range(2))
    q = _rows(rng, B, Sq, H, D)
    want_k, want_v = _expected(kc, kn, seqlens, table), _expected(vc, vn, seqlens, table)
    o, lse = tessel.attention_with_kvcache(q, kc, vc, seqlens, block_table=table, causal=True,
                                           return_lse=True, k=kn, v=vn)
    assert np.array_equal(kc, want_k) and np.array_equal(vc, want_v)
    o2, lse2 = tessel.attention_with_kvcache(q, want_k, want_v, seqlens + Sk, block_table=table,
                                             causal=True, return_lse=True)
    assert np.array_equal(o, o2) and np.array_equal(lse, lse2)
    assert seqlens.tolist() == [0, 37, 60]        # the caller's lengths, unchanged


def test_torch_cpu_caches_are_written_in_place():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    kc, vc = (torch.from_numpy(_rows(rng, B, 64, HKV, D)) for _ in range(2))
    kn, vn = (torch.from_numpy(_rows(rng, B, 2, HKV, D)) for _ in range(2))
    q = torch.from_numpy(_rows(rng, B, 2, H, D))
    seqlens = torch.tensor([1, 20, 62], dtype=torch.int32)
    want = _expected(kc.numpy(), kn.numpy(), seqlens.numpy())
    tessel.attention_with_kvcache(q, kc, vc, seqlens, k=kn, v=vn)
    assert np.array_equal(kc.numpy(), want)


def _small_call(seed, Sk, Sq):
    """A cache of 64 rows a sequence, Sk new rows and Sq queries for each of B sequences."""
    rng = np.random.default_rng(seed)
    kc, vc = (_rows(rng, B, 64, HKV, D) for _ in range(2))
    kn, vn = (_rows(rng, B, Sk, HKV, D) for _ in range(2))
    return kc, vc, kn, vn, _rows(rng, B, Sq, H, D)


def test_bad_appends_are_refused():
    kc, vc, kn, vn, q = _small_call(4, 4, 1)
    ok = np.array([0, 10, 60], np.int32)
    before = kc.copy()
    with pytest.raises(ValueError, match="come together"):
        tessel.attention_with_kvcache(q, kc, vc, ok, k=kn)
    with pytest.raises(ValueError, match=r"plus 4 new keys"):
        tessel.attention_with_kvcache(q, kc, vc, np.array([0, 10, 61], np.int32), k=kn, v=vn)
    with pytest.raises(ValueError, match="must have shape"):
        tessel.attention_with_kvcache(q, kc, vc, ok, k=kn[:, :, :1], v=vn[:, :, :1])
    with pytest.raises(TypeError, match="one dtype"):
        tessel.attention_with_kvcache(q, kc, vc, ok, k=kn.astype(np.float32), v=vn)
    strided = np.zeros((B, 64, HKV, 2 * D), np.float16)[..., :D]
    with pytest.raises(ValueError, match="written in place"):
        tessel.attention_with_kvcache(q, strided, strided, ok, k=kn, v=vn)
    assert np.array_equal(kc, before)              # nothing written by a refused call


@needs_ptxas()
@pytest.mark.parametrize("chip", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("page", [0, 16], ids=["contiguous", "paged"])
def test_the_append_program_keeps_its_rows_in_registers(tmp_path, chip, page):
    # A copy through registers on the row-blocked lowering (no shared memory), no spill.
    from tessel import cache
    from tessel.kvcache_append import kvcache_append_kernel
    D = 128
    new = np.zeros((3, 7, 2, D), np.float16)
    kc = np.zeros((40, 16, 2, D) if page else (3, 640, 2, D), np.float16)
    k = kvcache_append_kernel.warmup(
        new, new, kc, kc, np.zeros(3, np.int32), np.zeros((3, 40), np.int32), 3, 7, 2,
        kc.shape[1], 640, 40, 40, n_rs=2 * D, n_hs=D, nv_rs=2 * D, nv_hs=D, k_rs=2 * D, k_hs=D,
        v_rs=2 * D, v_hs=D, D=D, BLOCK=64, PAGE=page)
    b = cache.get_binary(k, k.options.gpu_options(chip), directory=str(tmp_path))
    assert b.manifest["spill_bytes"] == 0 and "ld.shared" not in b.ptx


@pytest.mark.parametrize("interleaved", [True, False], ids=["gptj", "neox"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("R", [32, 16], ids=["whole", "partial"])
def test_rotary_embeddings_of_new_keys_and_queries(interleaved, causal, R):
    # k rotated at positions cache_seqlens[b] + i before it is written; q at the same positions
    # when causal, else every query at cache_seqlens[b] (FlashAttention's flash_attn_with_kvcache);
    # the head dims past rotary_dim as they were.
    from tessel.reference import reference_kvcache, reference_rotary
    rng = np.random.default_rng(R + causal + 2 * interleaved)
    Sq = Sk = 3
    seqlens = np.array([0, 17, 40], np.int32)
    kc, vc = (_rows(rng, B, 64, HKV, D) for _ in range(2))
    kn, vn = (_rows(rng, B, Sk, HKV, D) for _ in range(2))
    q = _rows(rng, B, Sq, H, D)
    angles = np.arange(50)[:, None] * 0.3 / (1 + np.arange(R // 2))[None, :]
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    o = tessel.attention_with_kvcache(q, kc, vc, seqlens, causal=causal, k=kn, v=vn,
                                      rotary_cos=cos, rotary_sin=sin,
                                      rotary_interleaved=interleaved)
    k64, v64, q64 = (x.astype(np.float64) for x in (kc, vc, q))
    for b in range(B):
        pos = seqlens[b] + np.arange(Sk)
        want = reference_rotary(kn[b], cos, sin, pos, interleaved)
        got = k64[b, pos]
        assert np.abs(got - want).max() <= 2e-3 * max(1.0, np.abs(want).max())
        assert np.array_equal(vc[b, pos], vn[b])
        q64[b] = reference_rotary(q64[b], cos, sin, pos if causal else np.full(Sq, seqlens[b]),
                                  interleaved)
    ref, _ = reference_kvcache(q64, k64, v64, seqlens + Sk, causal=causal)
    assert np.abs(o.astype(np.float64) - ref).max() <= 2e-3 * max(1.0, np.abs(ref).max())


def test_bad_rotary_tables_are_refused():
    kc, vc, kn, vn, q = _small_call(5, 2, 2)
    ok = np.array([0, 10, 30], np.int32)
    table = np.zeros((40, 8), np.float32)
    before = kc.copy()
    with pytest.raises(ValueError, match="come together"):
        tessel.attention_with_kvcache(q, kc, vc, ok, k=kn, v=vn, rotary_cos=table)
    with pytest.raises(ValueError, match="multiple of 16"):
        tessel.attention_with_kvcache(q, kc, vc, ok, k=kn, v=vn, rotary_cos=table[:, :4],
                                      rotary_sin=table[:, :4])
    with pytest.raises(ValueError, match="reach position 31"):
        tessel.attention_with_kvcache(q, kc, vc, ok, k=kn, v=vn, rotary_cos=table[:31],
                                      rotary_sin=table[:31], causal=True)
    assert np.array_equal(kc, before)


def test_cuda_calls_wait_for_their_gpu_check(monkeypatch):
    # Until test_serving_gpu.py's kvcache append and rotary cases pass on a GPU, CUDA calls with
    # k=, v= or the rotary tables are refused, saying what to do instead.
    from tessel import kvcache_append
    monkeypatch.setattr(kvcache_append, "CUDA_CHECKED", False)
    with pytest.raises(NotImplementedError, match="waits for its GPU check"):
        kvcache_append._gate("attention_with_kvcache", "cuda", "k=, v=")
    kvcache_append._gate("attention_with_kvcache", "numpy", "k=, v=")
    monkeypatch.setattr(kvcache_append, "CUDA_CHECKED", True)
    kvcache_append._gate("attention_with_kvcache", "cuda", "k=, v=")
