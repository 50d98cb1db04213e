"""TESSEL_GPU_SHARD (test/gpu/shard.py), the split of a long GPU suite over device calls, on a
suite of plain tests: the shards run every test exactly once, and a bad value stops the run."""
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

SUITE = """
import pytest

@pytest.mark.parametrize("i", range(10))
def test_case(i):
    pass
"""


def run(tmp_path, shard):
    (tmp_path / "test_ten.py").write_text(SUITE)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "test" / "gpu"), TESSEL_GPU_SHARD=shard)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "shard", "-p", "no:cacheprovider",
                           "-v", str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=120, cwd=tmp_path)


def test_the_shards_run_each_test_once(tmp_path):
    ran = []
    for index in range(3):
        r = run(tmp_path, f"{index}/3")
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"shard {index} of 3" in r.stdout
        ran += re.findall(r"test_case\[(\d+)\] PASSED", r.stdout)
    assert sorted(map(int, ran)) == list(range(10))


def test_no_shard_runs_everything(tmp_path):
    r = run(tmp_path, "")
    assert r.returncode == 0 and "10 passed" in r.stdout, r.stdout


@pytest.mark.parametrize("shard", ["3/3", "x", "1/0", "-1/2", "1/2/3"])
def test_a_bad_shard_stops_the_run(tmp_path, shard):
    r = run(tmp_path, shard)
    assert r.returncode != 0 and "expected I/N" in r.stdout + r.stderr, r.stdout + r.stderr
    assert "passed" not in r.stdout
