#!/usr/bin/env bash
# The main job: installs what is missing and builds (scripts/build.sh), then shows what tessel
# makes of the bundled attention kernel (examples/attention_naive.mlir: f16, causal, grouped-query,
# written the naive way): its tile IR, the streamed form after tile-optimize, PTX and cubin for
# sm_80 and sm_90a with ptxas' resource report; then runs it — on the GPU where there is one, on
# the CPU interpreter otherwise — and checks it against float64 numpy.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# The build shows its progress (ninja's [done/total] lines; a cold build takes minutes) on
# stderr; the whole log goes to build/build.log, and is printed if the build fails.
mkdir -p "$root/build"
echo "== build (scripts/build.sh; full log in build/build.log)" >&2
set +e
"$root/scripts/build.sh" 2>&1 | tee "$root/build/build.log" |
  { grep --line-buffered -E '^\[[0-9]+/[0-9]+\]|^ninja: no work|^tessel setup:' >&2; true; }
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
  cat "$root/build/build.log" >&2
  echo "run-example.sh: the build failed (log above, and in build/build.log)" >&2
  exit "$status"
fi
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
bin="$root/build/bin"
example="$root/examples/attention_naive.mlir"
out="$root/build/example"
mkdir -p "$out"

echo "== tile IR, as written (${example#$root/}): the key loop"
sed -n '/scf.for/,/^  }/p' "$example"

echo
echo "== after tile-optimize: online softmax, one multiply before exp2, key loop split by the mask"
"$bin/tessel-opt" "$example" --tile-optimize > "$out/attention.opt.mlir"
grep -nE 'scf.for|block_mask|tile.reduce|math.exp2|tile.dot' "$out/attention.opt.mlir" | sed 's/^/   /'
echo "   (full IR: ${out#$root/}/attention.opt.mlir)"

for chip in sm_80 sm_90a; do
  echo
  echo "== $chip: PTX (${out#$root/}/attention.$chip.ptx)"
  "$bin/tesselc" "$example" --chip=$chip --emit=ptx -o "$out/attention.$chip.ptx"
  grep -E '^\.(version|target)' "$out/attention.$chip.ptx" | sed 's/^/   /'
  sed -n '/\.entry/,/^)/p' "$out/attention.$chip.ptx" | head -4 | sed 's/^/   /'
  echo "   ... $(wc -l < "$out/attention.$chip.ptx") lines"
  echo "== $chip: cubin and ptxas resource report"
  "$bin/tesselc" "$example" --chip=$chip --emit=cubin -o "$out/attention.$chip.cubin" \
    --ptxas-report | sed 's/^/   /'
  echo "   ${out#$root/}/attention.$chip.cubin: $(wc -c < "$out/attention.$chip.cubin") bytes"
done

echo
echo "== run"
"${PYTHON:-python3}" "$root/scripts/run_attention_example.py" --tessel-run "$bin/tessel-run"
