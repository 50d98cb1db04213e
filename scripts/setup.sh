#!/usr/bin/env bash
# Installs what tessel needs to build and test, only what is missing (idempotent), on Debian 12
# with the CUDA 13.0 toolkit at /usr/local/cuda. Sourced by build.sh, test.sh and run-example.sh.
set -euo pipefail

TESSEL_APT_PACKAGES=(llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools libzstd-dev
                     cmake ninja-build ccache lld libgtest-dev)
missing=()
for p in "${TESSEL_APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "tessel setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PYTHON=${PYTHON:-$(command -v python3)}
if ! "$PYTHON" -c "import numpy, pytest, pybind11" 2>/dev/null; then
  echo "tessel setup: installing numpy, pytest, pybind11 for $PYTHON"
  "$PYTHON" -m pip install -q --disable-pip-version-check numpy pytest "pybind11>=2.11" 2>&1 \
    | grep -v "Running pip as the 'root' user" || true
fi

# matplotlib draws the benchmark plots (scripts/bench_plots.py; its test skips without it).
TESSEL_MATPLOTLIB_VERSION=3.10.8
if ! "$PYTHON" -c "import matplotlib" 2>/dev/null; then
  echo "tessel setup: installing matplotlib $TESSEL_MATPLOTLIB_VERSION for $PYTHON"
  "$PYTHON" -m pip install -q --disable-pip-version-check "matplotlib==$TESSEL_MATPLOTLIB_VERSION" \
    2>&1 | grep -v "Running pip as the 'root' user" || true
fi

# Sphinx builds the API reference (docs/api, test/python/test_api_docs.py). It goes into a
# virtual environment of its own, shared by the checkouts of this machine: Sphinx needs a newer
# docutils than tools installed beside $PYTHON may pin (awscli: docutils<=0.19), and the venv
# leaves those alone. --system-site-packages: autodoc imports tessel, which needs numpy.
TESSEL_SPHINX_VERSION=8.2.3
export TESSEL_DOCS_VENV=${TESSEL_DOCS_VENV:-$HOME/.cache/tessel/docs-venv-sphinx-$TESSEL_SPHINX_VERSION}
if [ ! -x "$TESSEL_DOCS_VENV/bin/sphinx-build" ]; then
  echo "tessel setup: installing Sphinx $TESSEL_SPHINX_VERSION into $TESSEL_DOCS_VENV"
  # (pip's complaint that awscli outside the venv wants an older docutils is expected.)
  "$PYTHON" -m venv --system-site-packages "$TESSEL_DOCS_VENV" \
    && "$TESSEL_DOCS_VENV/bin/python" -m pip install -q --disable-pip-version-check \
         "sphinx==$TESSEL_SPHINX_VERSION" 2>&1 \
    | grep -v -e "Running pip as the 'root' user" -e "dependency resolver" -e "awscli" || true
  [ -x "$TESSEL_DOCS_VENV/bin/sphinx-build" ] \
    || echo "tessel setup: warning: could not install Sphinx; the API reference test will fail" >&2
fi

# torch: the ring attention tests (test/python/test_ring_attention.py) run torch.distributed with
# gloo. PyPI's default Linux wheel, pinned; it brings the CUDA runtime wheels along (~3 GB to
# download, ~5.8 GB installed: docs/dev/build.md). find_spec, not `import torch` (5-7 s here).
# TESSEL_NO_TORCH=1 skips it (the ring tests are then skipped).
TESSEL_TORCH_VERSION=2.15.0
if [ "${TESSEL_NO_TORCH:-0}" != 1 ] && \
   ! "$PYTHON" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)" \
     2>/dev/null; then
  echo "tessel setup: installing torch==$TESSEL_TORCH_VERSION for $PYTHON (about 3 GB, with CUDA wheels)"
  "$PYTHON" -m pip install -q --disable-pip-version-check "torch==$TESSEL_TORCH_VERSION" 2>&1 \
    | grep -v "Running pip as the 'root' user" || true
fi

if [ ! -x /usr/local/cuda/bin/ptxas ]; then
  echo "tessel setup: note: no ptxas at /usr/local/cuda/bin; cubin tests will be skipped" >&2
fi
