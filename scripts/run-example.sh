#!/usr/bin/env bash
# The main job: installs what is missing and builds (scripts/build.sh), then for the bundled
# example prints its tile IR, compiles it to PTX and cubin for sm_80 and sm_90a and prints
# ptxas' resource report for each. Where a GPU is present it will also run it (hook below).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/build.sh" >/dev/null
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}

example=${TESSEL_EXAMPLE:-$root/examples/softmax_rows.mlir}
tesselc="$root/build/bin/tesselc"
out="$root/build/example"
mkdir -p "$out"
name=$(basename "$example" .mlir)

echo "== tile IR: ${example#$root/}"
"$tesselc" "$example" --emit=tile -o - | grep -v '^ *//' | sed -n '1,40p'

for chip in sm_80 sm_90a; do
  echo
  echo "== $chip: PTX ($out/$name.$chip.ptx, kernel entry and first lines)"
  "$tesselc" "$example" --chip=$chip --emit=ptx -o "$out/$name.$chip.ptx"
  grep -E '^\.(version|target)' "$out/$name.$chip.ptx"
  sed -n '/\.entry/,$p' "$out/$name.$chip.ptx" | sed -n '1,14p'
  echo "   ... ($(wc -l < "$out/$name.$chip.ptx") lines)"
  echo "== $chip: cubin and ptxas resource report"
  "$tesselc" "$example" --chip=$chip --emit=cubin -o "$out/$name.$chip.cubin" --ptxas-report
  echo "   $out/$name.$chip.cubin: $(wc -c < "$out/$name.$chip.cubin") bytes"
done

echo
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "== GPU: $(nvidia-smi -L | head -1)"
  # Runs the examples' cubins through the CUDA driver and checks them against a host reference.
  # TODO(lead): wire the attention kernel in here (and its timing) when it lands.
  for chip in sm_80 sm_90a; do
    "$tesselc" "$root/examples/matmul.mlir" --chip=$chip --emit=cubin -o "$out/matmul.$chip.cubin"
    "$tesselc" "$root/examples/softmax_rows.mlir" --chip=$chip --emit=cubin \
      -o "$out/softmax_rows.$chip.cubin"
  done
  "${PYTHON:-python3}" "$root/test/gpu/run_examples.py" "$out"
else
  echo "== no GPU here (nvidia-smi found none): compiled only"
fi
