"""How the GPU benchmarks and suites take a GpuOptions switch (test/gpu/set_fields.py):
`--set NAME=VALUE` and TESSEL_TEST_GPU_OPTIONS, parsed once for all of them; runs without a
GPU."""
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "test" / "gpu"))
from set_fields import parse_set  # noqa: E402


def test_values_are_bools_ints_or_text():
    assert parse_set(["sync_masked_loops=False", "num_stages=3", "chip=sm_80", "late_p=True"]) \
        == {"sync_masked_loops": False, "num_stages": 3, "chip": "sm_80", "late_p": True}
    assert parse_set([]) == {}


@pytest.mark.parametrize("item", ["fuse_masked_loops", "=True", ""])
def test_an_item_without_a_name_and_value_is_refused(item):
    with pytest.raises(ValueError, match="expected NAME=VALUE"):
        parse_set([item])


def test_bench_cold_compile_refuses_a_bad_set():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_cold_compile.py"),
                        "--set", "fuse_masked_loops"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--set: expected NAME=VALUE" in r.stderr, r.stderr
