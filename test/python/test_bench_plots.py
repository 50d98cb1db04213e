"""scripts/bench_plots.py turns a committed GPU check's results into PNGs (matplotlib, Agg)."""
import subprocess
import sys

import pytest

from conftest import ROOT

pytest.importorskip("matplotlib")  # scripts/setup.sh installs it

SCRIPT = ROOT / "scripts" / "bench_plots.py"
RESULTS = ROOT / "bench" / "results" / "2026-12-01-h200-load-schedule"
PNG = b"\x89PNG\r\n\x1a\n"


def plot(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True, timeout=300)


def test_plots_of_a_committed_run(tmp_path):
    r = plot(RESULTS, "-o", tmp_path)
    assert r.returncode == 0, r.stderr
    names = {"forward-tflops.png", "forward-ratio.png", "mma-tflops.png", "before-after.png"}
    assert {p.name for p in tmp_path.iterdir()} == names
    for name in names:
        data = (tmp_path / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 10_000, name
    # The same results give the same bytes: committed plots change only with the data.
    again = tmp_path / "again"
    assert plot(RESULTS, "-o", again).returncode == 0
    for name in names:
        assert (again / name).read_bytes() == (tmp_path / name).read_bytes(), name


def test_single_file_for_the_gpu_check(tmp_path):
    r = plot(RESULTS, "--single", "-o", tmp_path)
    assert r.returncode == 0, r.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["speed.png"]
    assert (tmp_path / "speed.png").read_bytes().startswith(PNG)


def test_a_folder_without_speed_results(tmp_path):
    r = plot(tmp_path, "-o", tmp_path / "out")
    assert r.returncode == 1 and "no speed results" in r.stderr
    assert not (tmp_path / "out").exists()
