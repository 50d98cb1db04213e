"""A kernel whose mask and bias read captured tensors compiles for the GPU here (no GPU needed):
on the fast paths at their blocks, and on the reference lowering (what codegen=auto falls back
to for other dtypes or head dims) with blocks whose tiles fit its shared memory
(tessel.attention.gather_blocks)."""

import numpy as np
import pytest

from dsl_helpers import needs_ptxas  # (it also puts the built package on sys.path)
import tessel
import tessel.cache
from tessel.attention import gather_blocks

pytestmark = needs_ptxas()

N = 1000
DOC = np.zeros((2, N), np.int32)
REL = np.zeros((4, 2 * N - 1), np.float32)
LIMIT = {"sm_80": 163 * 1024, "sm_90a": 227 * 1024}


def kernel(D, dtype=np.float16):
    q = np.zeros((2, 4, N, D), dtype)
    return tessel.compile_attention(
        q, q, q, causal=True, block_m=gather_blocks(D)[0], block_n=gather_blocks(D)[1],
        mask_mod=lambda b, h, q_idx, kv_idx: DOC[b, q_idx] == DOC[b, kv_idx],
        score_mod=lambda s, b, h, q_idx, kv_idx: s + REL[h, q_idx - kv_idx + N - 1])


@pytest.mark.parametrize("D", [64, 128])
def test_codegen_auto_takes_it_on_the_reference_lowering(D, tmp_path, monkeypatch):
    monkeypatch.setenv("TESSEL_CACHE_DIR", str(tmp_path))
    k = kernel(D)
    assert k.asm["tile-opt"].count("tile.gather") >= 2
    for chip in ("sm_80", "sm_90a"):
        binary = k.binary(tessel.cache.GpuOptions(chip=chip, codegen="auto"))
        assert binary.cubin
        assert binary.dynamic_shared_bytes <= LIMIT[chip]


@pytest.mark.parametrize("chip,codegen", [("sm_90a", "wgmma"), ("sm_80", "mma")])
@pytest.mark.parametrize("D", [64, 128])
def test_the_fast_paths_take_it(chip, codegen, D, tmp_path, monkeypatch):
    """At the fast paths' blocks the gathers are read into registers (one global read per
    register; the document id of a query row once per row)."""
    monkeypatch.setenv("TESSEL_CACHE_DIR", str(tmp_path))
    q = np.zeros((2, 4, N, D), np.float16)
    k = tessel.compile_attention(
        q, q, q, causal=True, block_m=64, block_n=64,
        mask_mod=lambda b, h, q_idx, kv_idx: DOC[b, q_idx] == DOC[b, kv_idx],
        score_mod=lambda s, b, h, q_idx, kv_idx: s + REL[h, q_idx - kv_idx + N - 1])
    binary = k.binary(tessel.cache.GpuOptions(chip=chip, codegen=codegen))
    assert binary.cubin
    assert binary.dynamic_shared_bytes <= LIMIT[chip]
