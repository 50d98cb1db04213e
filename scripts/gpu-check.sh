#!/usr/bin/env bash
# The GPU check, on the GPU machine (from the repo root, with .bundle/ carried there):
# unpack the bundle → run the examples → check attention on the GPU against float64/float32
# references and against the interpreter → benchmark side by side with PyTorch SDPA → the Python
# DSL on CUDA tensors (test/gpu/test_python_gpu.py) and its launch overhead
# (test/gpu/bench_launch.py) → print a short table last and write JSON under $OUT (or
# build/gpu-check).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/build/gpu-check}
work=$(mktemp -d)
mkdir -p "$out"
tar -C "$work" -xJf "$root/.bundle/tessel-gpu.tar.xz"
export PATH="$work/bin:/usr/local/cuda/bin:$PATH" CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export PYTHONUNBUFFERED=1
nvidia-smi -L
echo "== examples (cubins built on the build machine)"
python3 "$root/test/gpu/run_examples.py" "$work/cubin" 2>&1 | tee "$out/examples.log"
echo "== ahead-of-time kernels (examples/aot: generated C header and source, libcuda only)"
"$work/bin/attention_aot" 2>&1 | tee "$out/aot.log" || echo "AOT example FAILED"
echo "== attention, the mma.sync fast path: correctness sweep and speed beside SDPA"
python3 "$root/test/gpu/check_attention_mma.py" --tessel-run "$work/bin/tessel-run" \
  --json "$out/attention_mma.json" 2>&1 | tee "$out/attention_mma.log"
echo "== the DSL on the GPU (Python 3.12 module): pytest against float32 torch, then launch overhead"
export PYTHONPATH="$work/python${PYTHONPATH:+:$PYTHONPATH}"
TESSEL_CACHE_DIR="$work/cache" TESSEL_GPU_RESULTS="$out/python_gpu.json" \
  python3 -m pytest -q -p no:cacheprovider "$root/test/gpu/test_python_gpu.py" \
  --junitxml "$out/python_gpu.xml" 2>&1 | tee "$out/python_gpu.log" || echo "python GPU tests FAILED"
TESSEL_CACHE_DIR="$work/cache" python3 "$root/test/gpu/bench_launch.py" --json "$out/launch.json" \
  2>&1 | tee "$out/launch.log" || echo "launch benchmark FAILED"
if [ "${TESSEL_GPU_CHECK_REFERENCE:-0}" = 1 ]; then
  echo "== attention, the reference lowering"
  python3 "$root/test/gpu/check_attention.py" --tessel-run "$work/bin/tessel-run" \
    --json "$out/attention.json" 2>&1 | tee "$out/attention.log"
fi
