# Sphinx configuration of tessel's API reference, built from the docstrings.
#
#   scripts/setup.sh installs Sphinx (pinned) into a virtual environment of its own;
#   test/python/test_api_docs.py builds this with `sphinx-build -W --keep-going -n` (warnings,
#   broken references included, fail the test suite) into build/docs-api/.
#
# autodoc imports tessel from the build tree (it needs the compiled tessel._tessel): the
# directory $TESSEL_BUILD_DIR/python, else build/python of this checkout.
import os
import pathlib
import sys

_root = pathlib.Path(__file__).resolve().parents[2]
_build = pathlib.Path(os.environ.get("TESSEL_BUILD_DIR", _root / "build"))
sys.path.insert(0, str(_build / "python"))
sys.path.insert(0, str(pathlib.Path(__file__).parent / "_ext"))

project = "tessel"
author = "the tessel authors"
copyright = "the tessel authors"
try:
    from tessel.version import VERSION as release
except ImportError:  # autodoc then reports what it cannot import
    release = "unknown"
version = release

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "tessel_sphinx"]
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True}
autodoc_typehints = "none"
add_module_names = False
nitpicky = True
# Names the docstrings use that no documentation here defines.
nitpick_ignore = [
    ("py:class", "numpy.ndarray"),
    ("py:class", "dict"),
    ("py:class", "tuple"),
]

html_theme = "alabaster"
html_title = f"tessel {release} API reference"
html_static_path = []
exclude_patterns = ["_build"]
