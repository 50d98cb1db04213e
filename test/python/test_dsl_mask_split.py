"""The mask split keeps the conjuncts it can classify (issue 14, item 4): causal=True with a
mask_mod the analysis cannot classify still skips the blocks after the diagonal, says so in a
remark, and computes the same attention."""
import os
import subprocess
import sys

import numpy as np
import pytest

import dsl_helpers
import tessel
from tessel import _tessel
from tessel.reference import max_rel_error, reference_attention

pytestmark = pytest.mark.skipif(not _tessel.has_interpreter,
                                reason="this build has no interpreter (branch interp not merged)")


def dilated(b, h, q_idx, kv_idx):
    return (q_idx - kv_idx) % 2 == 0  # M1


def inputs(n=100):
    rng = np.random.default_rng(0)
    return tuple(rng.standard_normal((1, 2, n, 16)).astype(np.float32) for _ in range(3))


def test_causal_keeps_block_skipping_next_to_an_unclassified_mask_mod():
    q, k, v = inputs()
    kernel = tessel.compile_attention(q, k, v, causal=True, mask_mod=dilated)
    ir = kernel.asm["tile-opt"]
    assert 'tile.block_mask = "residual"' in ir and 'tile.block_mask = "mixed"' in ir
    remarks = [m for sev, m, *_ in kernel.warnings if sev == "remark"
               and "tile-split-masked-loops" in m]
    assert len(remarks) == 1, kernel.warnings
    assert "2 of 3 mask conjuncts classified" in remarks[0]
    assert remarks[0].count("classified: arith.cmpi at") == 2
    line, col = dsl_helpers.marked(__file__, "M1", "(q_idx")   # the compare starts there
    assert f"kept element-wise: arith.cmpi at {__file__}:{line}:{col}" in remarks[0], remarks[0]
    o = tessel.attention(q, k, v, causal=True, mask_mod=dilated)
    ref = reference_attention(q, k, v, causal=True,
                              allowed=lambda b, h, qi, ki: (qi - ki) % 2 == 0)
    assert max_rel_error(o, ref[0]) < 1e-5


def test_tessel_explain_prints_the_remark(tmp_path):
    script = tmp_path / "explain.py"
    script.write_text("import numpy as np, tessel\n"
                      "q = np.ones((1, 1, 40, 16), np.float32)\n"
                      "tessel.compile_attention(q, q, q, causal=True,\n"
                      "    mask_mod=lambda b, h, qi, ki: (qi - ki) % 3 == 0)\n")
    env = dict(os.environ, TESSEL_EXPLAIN="1", PYTHONPATH=str(dsl_helpers.BUILD / "python"))
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "remark: tile-split-masked-loops: 2 of 3 mask conjuncts classified" in r.stderr
    assert f"kept element-wise: arith.cmpi at {script}:4:" in r.stderr
