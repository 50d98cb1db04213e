#!/usr/bin/env bash
# One hash of the sources the bundle's binaries are built from (C++, TableGen, CMake), with no git
# needed: gpu-bundle.sh stores it in the bundle, gpu-check.sh compares it with the checkout's and
# says loudly when the binaries are older than the tree they are checked against.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
find CMakeLists.txt cmake dialects include lib tools python/CMakeLists.txt python/src -type f \
  \( -name '*.cpp' -o -name '*.h' -o -name '*.td' -o -name '*.txt' -o -name '*.cmake' \) \
  -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16
