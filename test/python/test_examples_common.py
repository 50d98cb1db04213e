"""examples/python/_common.py finds tessel without shadowing an installed one (issue 14, item 8).

Runs a copy of _common.py in a stand-in checkout whose build/python holds a fake tessel, with a
fake installed tessel on PYTHONPATH, and asks which one `import tessel` found."""
import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def fake_package(where, installed):
    (where / "tessel").mkdir(parents=True)
    (where / "tessel" / "__init__.py").write_text(f"INSTALLED = {installed}\n")
    (where / "tessel" / "reference.py").write_text(
        "def max_rel_error(a, b): return 0.0\ndef reference_attention(*a, **k): return None\n")


def which_tessel(tmp_path, env_extra):
    checkout = tmp_path / "checkout"
    (checkout / "examples" / "python").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "python" / "_common.py", checkout / "examples" / "python")
    fake_package(checkout / "build" / "python", installed=False)
    fake_package(tmp_path / "site", installed=True)
    env = {k: v for k, v in os.environ.items() if k != "TESSEL_BUILD_DIR"}
    env.update(PYTHONPATH=str(tmp_path / "site"), **env_extra)
    code = "import _common, tessel; print('installed' if tessel.INSTALLED else 'build tree')"
    out = subprocess.run([sys.executable, "-c", code], cwd=checkout / "examples" / "python",
                         env=env, check=True, capture_output=True, text=True)
    return out.stdout.strip()


def test_an_installed_tessel_is_not_shadowed_by_the_build_tree(tmp_path):
    assert which_tessel(tmp_path, {}) == "installed"


def test_tessel_build_dir_still_selects_a_build_tree(tmp_path):
    assert which_tessel(tmp_path, {"TESSEL_BUILD_DIR": str(tmp_path / "checkout" / "build")}) \
        == "build tree"
