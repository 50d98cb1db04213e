"""Chunked local attention written as a mask_mod, `q_idx // C == kv_idx // C` (Llama 4's;
FlashAttention-3's attention_chunk): tile-floor-quotient-ranges makes it index ranges that
tile-split-masked-loops classifies, so a row visits its chunk's key blocks only. Results
against float64 forward and backward, chunks that hold whole kernel blocks or not; the
classification read from the kernels' IR; the sm_90a kernel through ptxas."""
import numpy as np
import pytest

import dsl_helpers  # noqa: F401 (puts the build's package on the path)
import tessel
from tessel import _tessel
from tessel.reference import max_rel_error, reference_attention, reference_attention_backward

pytestmark = pytest.mark.skipif(not _tessel.has_interpreter,
                                reason="this build has no interpreter (branch interp not merged)")


def chunked(C):
    def same_chunk(b, h, q_idx, kv_idx):
        return q_idx // C == kv_idx // C
    return same_chunk


def _allowed(C, causal):
    def allowed(b, h, qi, ki):
        ok = (qi // C) == (ki // C)
        return ok & (qi >= ki) if causal else ok
    return allowed


def _qkv(N, D=16, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((1, 2, N, D)).astype(np.float32) for _ in range(3))


@pytest.mark.parametrize("C", [64, 48, 40, 200])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_chunk_mask_forward_and_backward(C, causal):
    N = 150
    q, k, v = _qkv(N)
    o, lse = tessel.attention(q, k, v, causal=causal, mask_mod=chunked(C), return_lse=True)
    ro, rlse = reference_attention(q, k, v, causal=causal, allowed=_allowed(C, causal))
    assert max_rel_error(o, ro) < 1e-5
    assert max_rel_error(lse, rlse) < 1e-5
    do = np.random.default_rng(1).standard_normal(o.shape).astype(np.float32)
    grads = tessel.attention_backward(q, k, v, o, lse, do, causal=causal, mask_mod=chunked(C))
    want = reference_attention_backward(q, k, v, do, causal=causal,
                                        allowed=_allowed(C, causal))
    for g, w in zip(grads, want):
        assert max_rel_error(g, w) < 1e-4


def _key_loops(kernel):
    ir = kernel.asm["tile-opt"]
    return [line.split('"')[1] for line in ir.splitlines() if "tile.block_mask =" in line]


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_whole_blocks_in_a_chunk_are_classified(causal):
    # Query blocks that lie in one chunk (C a multiple of the query block): the chunk's
    # bounds decide the key loop (masked boundary blocks, an unmasked middle), nothing kept
    # element-wise ("residual"). Where blocks straddle chunks (C = 40 over 64-row blocks),
    # the mask stays element-wise: correct (above), every key block visited.
    q, k, v = _qkv(512, D=64)
    whole = tessel.compile_attention(q, k, v, causal=causal, mask_mod=chunked(128))
    loops = _key_loops(whole)
    assert "all_true" in loops and "residual" not in loops, loops
    assert "arith.divsi" not in whole.asm["tile-opt"].split("scf.for", 1)[1]
    straddling = tessel.compile_attention(q, k, v, causal=causal, mask_mod=chunked(40))
    assert "all_true" not in _key_loops(straddling)


def test_sm90a_chunk_kernel_compiles_without_spill(tmp_path):
    # The classified chunk mask on the wgmma fast path (d128 causal, the blocks a CUDA call
    # takes with a mask_mod): ptxas, 0 bytes of spill.
    from tessel import cache
    from tessel.attention import attention_kernel, gpu_blocks, key_loop_constexprs
    from tessel.mod_functions import as_jit
    try:
        cache.ptxas_version()
    except tessel.CompilationError as e:
        pytest.skip(str(e))
    n, D = 4096, 128
    x = np.zeros((1, 2, n, D), np.float16)
    lse = np.zeros((1, 2, n), np.float32)
    mask = chunked(1024)
    BM, BN = gpu_blocks(D, "f16", n, n, "sm_90a", unmasked=False, causal=True, mods=True)
    cx = dict(D=D, BLOCK_M=BM, BLOCK_N=BN, CAUSAL=True, SCORE_MOD=None,
              MASK_MOD=as_jit(mask, "mask_mod"),
              **key_loop_constexprs(n, n, D, BM, BN, True, None, mask, "sm_90a"))
    kern = attention_kernel.warmup(x, x, x, x, lse, n, n, 2, 2, 0.1, **cx)
    b = cache.get_binary(kern, kern.options.gpu_options("sm_90a"), directory=str(tmp_path))
    assert b.manifest["spill_bytes"] == 0, b.manifest
    assert "wgmma.mma_async" in b.ptx
