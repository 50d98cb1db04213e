"""The C++ sources are formatted with the repository's .clang-format (scripts/format.sh)."""
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("clang-format") is None,
                    reason="clang-format is not installed (scripts/format.sh installs it)")
def test_cpp_sources_are_formatted():
    r = subprocess.run(["bash", str(ROOT / "scripts" / "format.sh"), "--check"], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, "run scripts/format.sh; not formatted:\n" + r.stdout + r.stderr
