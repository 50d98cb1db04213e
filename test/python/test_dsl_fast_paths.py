"""The issue-14 semantics reach the GPU fast paths (compiled here, no GPU needed): the attention
kernel with Python's // and % (on its own head arithmetic and in mask_mods), integer abs and
tl.cdiv in mods, and the partly classified causal & modulo mask, compiles to a cubin with
codegen=wgmma on sm_90a and codegen=mma on sm_80 — both refuse programs outside their class, so
none of these fell back to the reference lowering."""

import numpy as np
import pytest

from dsl_helpers import needs_ptxas  # (it also puts the built package on sys.path)
import tessel
import tessel.cache
from tessel import language as tl

pytestmark = needs_ptxas()

CASES = {
    "causal": dict(causal=True),
    "causal_and_modulo": dict(causal=True,
                              mask_mod=lambda b, h, q_idx, kv_idx: (q_idx - kv_idx) % 4 == 1),
    "floor_blocks": dict(mask_mod=lambda b, h, q_idx, kv_idx: q_idx // 3 >= kv_idx // 3),
    "abs_bias": dict(score_mod=lambda s, b, h, q_idx, kv_idx:
                     s - 0.05 * tl.abs(q_idx - kv_idx).to(tl.float32)),
    "cdiv_blocks": dict(mask_mod=lambda b, h, q_idx, kv_idx:
                        tl.cdiv(q_idx + 1, 4) >= tl.cdiv(kv_idx + 1, 4)),
}


@pytest.mark.parametrize("chip,codegen", [("sm_90a", "wgmma"), ("sm_80", "mma")])
@pytest.mark.parametrize("name", list(CASES))
def test_fast_path_takes_the_kernel(name, chip, codegen, tmp_path, monkeypatch):
    monkeypatch.setenv("TESSEL_CACHE_DIR", str(tmp_path))
    q = np.zeros((1, 2, 1000, 64), np.float16)
    kernel = tessel.compile_attention(q, q, q, block_m=64, block_n=64, **CASES[name])
    if name == "causal_and_modulo":
        assert 'tile.block_mask = "residual"' in kernel.asm["tile-opt"]
    binary = kernel.binary(tessel.cache.GpuOptions(chip=chip, codegen=codegen))
    assert binary.cubin


def test_softcap_uses_the_approximate_tanh_on_the_fast_paths_only(tmp_path, monkeypatch):
    """tanh in a score_mod is one tanh.approx.f32 on the fast paths (f16/bf16 operands); the
    reference lowering (here: f32 inputs) keeps upstream's accurate expansion."""
    monkeypatch.setenv("TESSEL_CACHE_DIR", str(tmp_path))

    def softcap(s, b, h, q_idx, kv_idx):
        return 30.0 * tl.tanh(s / 30.0)
    for dtype, chip, codegen, block, approx in ((np.float16, "sm_90a", "wgmma", 64, True),
                                                (np.float16, "sm_80", "mma", 64, True),
                                                (np.float32, "sm_80", "auto", 32, False)):
        q = np.zeros((1, 2, 256, 64), dtype)
        kernel = tessel.compile_attention(q, q, q, causal=True, score_mod=softcap,
                                          block_m=block, block_n=block)
        ptx = kernel.binary(tessel.cache.GpuOptions(chip=chip, codegen=codegen)).ptx
        assert ("tanh.approx.f32" in ptx) == approx, (dtype, chip)
