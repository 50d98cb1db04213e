"""Helpers of the DSL tests: import the built package, locate marked source lines."""
import os
import pathlib
import shutil
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("TESSEL_BUILD_DIR", ROOT / "build"))
sys.path.insert(0, str(BUILD / "python"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
# Whether ptxas (the CUDA toolkit) is on PATH or at its default place: the tests that make
# cubins need it, the rest of the suite does not.
HAS_PTXAS = bool(shutil.which("ptxas", path=os.pathsep.join([os.environ.get("PATH", ""),
                                                            "/usr/local/cuda/bin"])))


def needs_ptxas():
    """The skip mark of a test (or, as `pytestmark`, a module) that makes cubins."""
    import pytest
    return pytest.mark.skipif(not HAS_PTXAS, reason="needs ptxas (the CUDA toolkit) to make cubins")


def random_qkv(Nq=17, D=16, seed=0):
    """q, k, v of shape [1, 2, Nq, D], float32, standard normal."""
    import numpy as np
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((1, 2, Nq, D)).astype(np.float32) for _ in range(3))


def assert_located(err, path, tag, token, message):
    """`err` (a CompilationError) points at `token` on the line of `path` marked `# <tag>` and
    its message holds `message`."""
    line, col = marked(path, tag, token)
    assert (err.filename, err.lineno, err.col) == (path, line, col), str(err)
    assert message in err.message, err.message


def marked(path, tag, token):
    """(line, column) of `token` on the line of `path` that ends with the comment `# <tag>`."""
    for i, line in enumerate(pathlib.Path(path).read_text().splitlines(), 1):
        if line.rstrip().endswith(f"# {tag}"):
            col = line.index(token) + 1
            return i, col
    raise AssertionError(f"no line marked {tag}")
