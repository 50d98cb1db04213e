"""Helpers of the DSL tests: import the built package, locate marked source lines."""
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("TESSEL_BUILD_DIR", ROOT / "build"))
sys.path.insert(0, str(BUILD / "python"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))


def marked(path, tag, token):
    """(line, column) of `token` on the line of `path` that ends with the comment `# <tag>`."""
    for i, line in enumerate(pathlib.Path(path).read_text().splitlines(), 1):
        if line.rstrip().endswith(f"# {tag}"):
            col = line.index(token) + 1
            return i, col
    raise AssertionError(f"no line marked {tag}")
