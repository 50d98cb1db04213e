"""The API reference (docs/api) builds from the docstrings with no warning, and the tile
language's documented signatures are the ones the front end takes."""
import inspect
import os
import pathlib
import shutil
import subprocess
import time

import pytest

from conftest import BUILD, ROOT

import tessel
from tessel import frontend
from tessel import language as tl

SPHINX_VERSION = "8.2.3"  # scripts/setup.sh installs it


def sphinx_build():
    venv = os.environ.get("TESSEL_DOCS_VENV") or str(
        pathlib.Path.home() / ".cache" / "tessel" / f"docs-venv-sphinx-{SPHINX_VERSION}")
    path = pathlib.Path(venv) / "bin" / "sphinx-build"
    if path.exists():
        return str(path)
    found = shutil.which("sphinx-build")
    if found:
        return found
    pytest.fail(f"no sphinx-build (looked in {venv} and on PATH): run scripts/setup.sh")


def test_api_reference_builds_without_warnings(tools):
    out = BUILD / "docs-api"
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, TESSEL_BUILD_DIR=str(BUILD))
    start = time.time()
    # -W: warnings are errors; -n: every reference must resolve; -E: read every source again
    # (an incremental build would not repeat an old warning).
    r = subprocess.run([sphinx_build(), "-W", "--keep-going", "-n", "-E", "-q", "-b", "html",
                        str(ROOT / "docs" / "api"), str(out)],
                       capture_output=True, text=True, env=env, timeout=300)
    took = time.time() - start
    assert r.returncode == 0, r.stdout + r.stderr
    assert "WARNING" not in r.stderr and "ERROR" not in r.stderr, r.stderr
    assert took < 60, f"the API reference took {took:.0f} s to build"
    pages = {p.name for p in out.glob("*.html")}
    assert {"index.html", "attention.html", "jit.html", "language.html", "options.html",
            "errors.html", "cli.html"} <= pages
    cli = (out / "cli.html").read_text()
    # The tools' --help was run at build time.
    for text in ("--spec=&lt;file&gt;", "--codegen", "tile-optimize", "tessel cache explain"):
        assert text in cli, text
    language = (out / "language.html").read_text()
    for name in tl.BUILTINS:
        assert f'id="tessel.language.{name}"' in language, name


@pytest.mark.parametrize("name", sorted(tl.BUILTINS))
def test_builtin_signature_matches_the_front_end(name):
    """tl.<name>'s documented signature is the front end's handler's, less `self` and `node`
    (stream and static_range are loops the front end reads itself)."""
    documented = inspect.signature(tl.BUILTINS[name])
    assert tl.BUILTINS[name].__doc__, f"tl.{name} has no docstring"
    if name in ("stream", "static_range"):
        return
    handler = inspect.signature(getattr(frontend.CodeGenerator, "tl_" + name))
    params = list(handler.parameters.values())[2:]
    assert [(p.name, p.default) for p in params] == \
        [(p.name, p.default) for p in documented.parameters.values()]


def test_gpu_options_after_import_tessel():
    assert tessel.cache.GpuOptions is tessel.GpuOptions
    assert tessel.GpuOptions(chip="sm_80").chip == "sm_80"
