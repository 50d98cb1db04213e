#!/usr/bin/env bash
# Builds tessel here and packs what the GPU check needs into .bundle/ (git-ignored, carried to the
# GPU machine): the stripped tessel-run (compiler + interpreter + launcher in one static binary,
# no LLVM needed there) and the example cubins with their launch needs.
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
tar -C "$bundle" -cf - bin cubin | xz -T2 -6 > "$bundle/tessel-gpu.tar.xz"
rm -rf "$bundle/bin" "$bundle/cubin" "$bundle/aot"
echo "bundle: $(du -h "$bundle/tessel-gpu.tar.xz" | cut -f1) in .bundle/tessel-gpu.tar.xz"
