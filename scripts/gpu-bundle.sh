#!/usr/bin/env bash
# Builds tessel here and packs what the GPU check needs into .bundle/ (git-ignored, carried to the
# GPU machine): the stripped tessel-run (compiler + interpreter + launcher in one static binary,
# no LLVM needed there), the example cubins with their launch needs, and the Python package with
# the extension built for the GPU machine's Python 3.12 (build-py312/, only the _tessel target).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh" >/dev/null
bundle="$root/.bundle"
rm -rf "$bundle" && mkdir -p "$bundle/bin" "$bundle/cubin"
strip -o "$bundle/bin/tessel-run" "$root/build/bin/tessel-run"
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
for chip in sm_80 sm_90a; do
  for ex in matmul softmax_rows; do
    "$root/build/bin/tesselc" "$root/examples/$ex.mlir" --chip=$chip --emit=cubin \
      -o "$bundle/cubin/$ex.$chip.cubin"
  done
done
# The ahead-of-time example: generated C source + embedded cubins, linked against libcuda only.
PYTHONPATH="$root/build/python" bash "$root/examples/aot/build.sh" "$bundle/aot" >/dev/null
cp "$bundle/aot/attention_aot" "$bundle/bin/"
# The Python package for Python 3.12 (the GPU machine's): tessel/*.py + _tessel built there.
"$root/scripts/build-py312.sh" >/dev/null
mkdir -p "$bundle/python/tessel"
cp "$root"/python/tessel/*.py "$bundle/python/tessel/"
strip -o "$bundle/python/tessel/$(basename "$root"/build-py312/python/tessel/_tessel.cpython-312-*.so)" \
  "$root"/build-py312/python/tessel/_tessel.cpython-312-*.so
bash "$root/scripts/native-sources-hash.sh" > "$bundle/python/native-sources.hash"
tar -C "$bundle" -cf - bin cubin python | xz -T2 -6 > "$bundle/tessel-gpu.tar.xz"
rm -rf "$bundle/bin" "$bundle/cubin" "$bundle/aot" "$bundle/python"
echo "bundle: $(du -h "$bundle/tessel-gpu.tar.xz" | cut -f1) in .bundle/tessel-gpu.tar.xz"
