#!/usr/bin/env bash
# Configures (once) and builds tessel in build/. ccache lives at a fixed path and hashes paths
# relative to the checkout, so a fresh clone anywhere on the machine reuses earlier objects.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/setup.sh"

export CCACHE_DIR=${TESSEL_CCACHE_DIR:-/var/cache/tessel-ccache}
export CCACHE_BASEDIR="$root"
export CCACHE_NOHASHDIR=1
export CCACHE_COMPILERCHECK=content
mkdir -p "$CCACHE_DIR"
ccache --max-size=5G >/dev/null

build="$root/build"
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DLLVM_USE_LINKER=lld \
    -DPython3_EXECUTABLE="${PYTHON:-$(command -v python3)}" >/dev/null
fi
# Two jobs: MLIR translation units take 1-2.5 GB each; this machine has 2 cores and 24 GB.
ninja -C "$build" -j "${TESSEL_JOBS:-2}" all
