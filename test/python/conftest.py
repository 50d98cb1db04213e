"""Shared fixtures of tessel's Python tests: where the built tools are."""
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("TESSEL_BUILD_DIR", ROOT / "build"))


@pytest.fixture(scope="session")
def tools():
    bin_dir = BUILD / "bin"
    if not (bin_dir / "tessel-opt").exists():
        pytest.fail(f"tessel is not built: no {bin_dir}/tessel-opt (run scripts/build.sh)")
    return bin_dir
