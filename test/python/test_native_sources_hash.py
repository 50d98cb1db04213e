"""scripts/native-sources-hash.sh: the hash gpu-check.sh compares to say that a bundle's binaries
were built from other C++ sources than the checkout's (s40 ran a stale bundle without knowing)."""

import pathlib
import shutil
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]


def tree(tmp_path):
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "native-sources-hash.sh", tmp_path / "scripts")
    for folder in ("cmake", "dialects", "include", "lib", "tools", "python/src",
                   "python/tessel"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "CMakeLists.txt").write_text("project(x)\n")
    (tmp_path / "python" / "CMakeLists.txt").write_text("add_library(y)\n")
    (tmp_path / "lib" / "a.cpp").write_text("int a;\n")
    (tmp_path / "python" / "tessel" / "b.py").write_text("b = 1\n")
    return tmp_path


def digest(root):
    out = subprocess.run(["bash", str(root / "scripts" / "native-sources-hash.sh")],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert len(out) == 16
    return out


def test_the_hash_follows_the_native_sources_only(tmp_path):
    root = tree(tmp_path)
    first = digest(root)
    assert digest(root) == first
    (root / "python" / "tessel" / "b.py").write_text("b = 2\n")     # Python rides along as source
    assert digest(root) == first
    (root / "lib" / "a.cpp").write_text("int a = 1;\n")
    changed = digest(root)
    assert changed != first
    (root / "include" / "c.h").write_text("#pragma once\n")          # a new header counts too
    assert digest(root) != changed


def test_the_repository_has_a_hash():
    assert len(digest(ROOT)) == 16
