"""The GPU check scripts' one-case runner (test/gpu/attention_case.py) on the interpreter: the
same plumbing the H200 runs (kernel text, .npy arguments, scale, outputs, float64 comparison,
fully masked rows) checked in CI, where device="cpu" stands in for the GPU."""
import pathlib
import re
import sys

import pytest

from dsl_helpers import BUILD

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "gpu"))
import attention_case  # noqa: E402

TESSEL_RUN = str(BUILD / "bin" / "tessel-run")


@pytest.mark.parametrize("dtype,mask,scale", [("f16", "causal", None), ("bf16", "none", -0.25),
                                              ("f32", "window", 0.0), ("f16", "none", None)])
def test_case_passes_on_the_interpreter(tmp_path, dtype, mask, scale):
    r = attention_case.run_case(TESSEL_RUN, tmp_path, dtype, mask, 1, 2, 1, 17, 33, 64, 16, 16,
                                window=5, device="cpu", scale=scale)
    assert r["ok"], r
    assert r["nan_free"] and r["masked_ok"]
    assert r["rel_max"] < attention_case.TOL[dtype] and r["lse_abs_err"] < 1e-2


def test_case_fails_against_a_wrong_reference(tmp_path, monkeypatch):
    # The comparison can fail: a reference without the causal mask disagrees with the kernel.
    real = attention_case.reference_attention
    monkeypatch.setattr(attention_case, "reference_attention",
                        lambda q, k, v, scale, mask, window: real(q, k, v, scale, "none", window))
    r = attention_case.run_case(TESSEL_RUN, tmp_path, "f32", "causal", 1, 1, 1, 9, 9, 64, 16, 16,
                                device="cpu")
    assert not r["ok"] and r["rel_max"] > 1e-2


def test_tessel_run_failure_is_reported(tmp_path):
    r = attention_case.run_case(TESSEL_RUN, tmp_path, "f16", "none", 1, 1, 1, 4, 4, 64, 16, 16,
                                device="nowhere")
    assert not r["ok"] and "device" in r["stderr"]


def test_case_line_names_the_case_and_its_errors(tmp_path):
    r = attention_case.run_case(TESSEL_RUN, tmp_path, "f16", "causal", 1, 1, 1, 9, 9, 64, 16, 16,
                                device="cpu", scale=-0.25)
    r.update(dtype="f16", mask="causal", nq=9, nk=9, d=64, bm=16, bn=16, scale=-0.25)
    line = attention_case.case_line(r, wall=True)
    assert line.startswith("f16   causal  nq=    9 nk=    9 d= 64 16x16 scale=-0.25: ok  rel ")
    assert f"({r['wall_s']} s)" in line
    r["ok"], r["stderr"] = False, "boom"
    assert ": FAIL" in attention_case.case_line(r) and attention_case.case_line(r).endswith("  boom")


def test_gpu_check_runs_every_gpu_test_file():
    # scripts/gpu-check.sh is the full GPU check: each test/gpu/test_*.py is one of its steps.
    # test_fp8_gpu.py was not, and a wrong FP8 d128 kernel went a day unseen (2026-12-06).
    root = pathlib.Path(__file__).resolve().parents[2]
    script = (root / "scripts" / "gpu-check.sh").read_text()
    files = sorted(p.name for p in (root / "test" / "gpu").glob("test_*.py"))
    assert files, "no GPU test files found"
    steps = re.findall(r"^suite \w+ (test_\w+\.py)$", script, re.M) + \
        re.findall(r"test/gpu/(test_\w+\.py)", script)
    missing = [f for f in files if f not in steps]
    assert not missing, f"scripts/gpu-check.sh does not run {missing}"
