"""Launch grids for any number of (batch, head) rows (issue 12's bug: b·h > 65,535 failed in
cuLaunchKernel). tessel.grid.fold_grid picks the grid; the kernels decode it. Here the cap is
lowered so that the interpreter runs folded grids on small shapes and checks the numbers; the
launch itself on the fake driver is test_launch_dispatch.py::test_any_number_of_batch_heads."""
import numpy as np
import pytest

from dsl_helpers import random_qkv  # noqa: F401  (puts the build's package on the path)
import tessel
from tessel import grid
from tessel.reference import max_rel_error, reference_attention, reference_varlen


def test_fold_grid_below_and_above_the_cap():
    assert grid.fold_grid(7, 65535) == (7, 65535, 1)
    assert grid.fold_grid(3, 70000) == (6, 35000, 1)          # 70,000 = 2 x 35,000
    assert grid.fold_grid(1, 1750 * 40) == (2, 35000, 1)
    assert grid.fold_grid(2, 65537) == (2 * 65537, 1, 1)      # a prime: every row on x
    assert grid.fold_grid(0, 10**6) == (0, 10**6, 1)          # nothing to launch
    for n_blocks, rows in ((5, 123457), (1, 2 * 65535 + 2), (9, 65536)):
        x, y, z = grid.fold_grid(n_blocks, rows)
        assert y <= grid.MAX_GRID_Y and z == 1 and (x // n_blocks) * y == rows
    with pytest.raises(ValueError, match="more than CUDA's 2147483647 along x"):
        grid.fold_grid(2**20, 65537 * 65537)


@pytest.fixture
def small_cap(monkeypatch):
    monkeypatch.setattr(grid, "MAX_GRID_Y", 4)
    grid.rows_on_y.cache_clear()
    yield
    grid.rows_on_y.cache_clear()


@pytest.mark.parametrize("B,H,Hkv", [(2, 3, 3), (7, 1, 1), (3, 4, 2)], ids=["6", "7", "12-gqa"])
def test_folded_grids_compute_every_row(small_cap, B, H, Hkv):
    rng = np.random.default_rng(B * H)
    q = rng.standard_normal((B, H, 20, 16)).astype(np.float32)
    k, v = (rng.standard_normal((B, Hkv, 24, 16)).astype(np.float32) for _ in range(2))
    assert grid.fold_grid(1, B * H)[1] <= 4          # the fold is really taken
    o = tessel.attention(q, k, v, causal=True, enable_gqa=True)
    ro, _ = reference_attention(q, k, v, causal=True, enable_gqa=True)
    assert max_rel_error(o, ro) < 2e-5


def test_folded_grid_backward(small_cap):
    rng = np.random.default_rng(1)
    q, k, v, do = (rng.standard_normal((5, 1, 12, 8)).astype(np.float32) for _ in range(4))
    o, lse = tessel.attention(q, k, v, return_lse=True)
    dq, dk, dv = tessel.attention_backward(q, k, v, o, lse, do)
    from tessel.reference import reference_attention_backward
    for got, want in zip((dq, dk, dv), reference_attention_backward(q, k, v, do)):
        assert max_rel_error(got, want) < 1e-4


def test_folded_grid_varlen(small_cap):
    rng = np.random.default_rng(2)
    lengths = np.array([0, 9, 20, 31, 40], dtype=np.int32)      # 4 sequences x 3 heads = 12 rows
    q, k, v = (rng.standard_normal((40, 3, 8)).astype(np.float32) for _ in range(3))
    o = tessel.attention_varlen(q, k, v, lengths, lengths, 11, 11, causal=True)
    ro, _ = reference_varlen(q, k, v, lengths, lengths, causal=True)
    assert max_rel_error(o, ro) < 2e-5
