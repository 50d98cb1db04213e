"""The build writes only into the build tree (issue 14, item 6): the mlir-doc target's op
reference goes to build/docs/, not /docs at the file system root."""
import pathlib
import shutil
import subprocess

import pytest

from dsl_helpers import BUILD


@pytest.mark.skipif(not (BUILD / "build.ninja").exists() or not shutil.which("ninja"),
                    reason="needs the ninja build tree")
def test_mlir_doc_writes_into_the_build_tree():
    out = subprocess.run(["ninja", "-C", str(BUILD), "-t", "query", "mlir-doc"],
                         capture_output=True, text=True, check=True).stdout
    docs = subprocess.run(["ninja", "-C", str(BUILD), "-t", "targets", "all"],
                          capture_output=True, text=True, check=True).stdout
    outputs = [line.split(":")[0] for line in docs.splitlines() if "TileDialect.md" in line]
    assert outputs, out
    for path in outputs:
        assert not path.startswith("/") or path.startswith(str(BUILD)), path
    assert any(pathlib.Path(p).as_posix().endswith("docs/Dialects/TileDialect.md") and
               (not p.startswith("/") or p.startswith(str(BUILD))) for p in outputs), outputs
