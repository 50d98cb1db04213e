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


def test_bad_appends_are_refused():
    rng = np.random.default_rng(4)
    kc, vc = (_rows(rng, B, 64, HKV, D) for _ in range(2))
    kn, vn = (_rows(rng, B, 4, HKV, D) for _ in range(2))
    q = _rows(rng, B, 1, H, D)
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
