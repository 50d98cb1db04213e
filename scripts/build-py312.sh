#!/usr/bin/env bash
# Builds the Python extension tessel._tessel for Python 3.12 (the GPU machine's Python) in
# build-py312/: a second CMake build of the same sources, only the _tessel target. pybind11 is
# header-only: taken from the 3.12 interpreter if it has it, else from the default python3.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/setup.sh"
py312=${TESSEL_PYTHON312:-/root/.pyenv/versions/3.12.1/bin/python3}
export CCACHE_DIR=${TESSEL_CCACHE_DIR:-/var/cache/tessel-ccache}
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1 CCACHE_COMPILERCHECK=content
build="$root/build-py312"
if [ ! -f "$build/build.ninja" ]; then
  pybind11_dir=$("$py312" -m pybind11 --cmakedir 2>/dev/null || python3 -m pybind11 --cmakedir)
  cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DLLVM_USE_LINKER=lld -DPython3_EXECUTABLE="$py312" -Dpybind11_DIR="$pybind11_dir" >/dev/null
fi
ninja -C "$build" -j "${TESSEL_JOBS:-2}" _tessel tessel-python-sources
