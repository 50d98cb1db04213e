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
