#!/usr/bin/env bash
# Builds the AOT example: generates the kernels with `python -m tessel aot`, then compiles
# main.cpp with the generated C source, linking libcuda only. Usage: build.sh OUT_DIR
# (PYTHONPATH must reach the tessel package, e.g. build/python). Run OUT_DIR/attention_aot on a GPU.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/out}
cuda=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$out"
"${PYTHON:-python3}" -m tessel aot "$here/attention_dsl.py" -o "$out" --name tessel_attention \
  --spec dtype=f16,head_dim=64,causal=1,chip=sm_90a \
  --spec dtype=f16,head_dim=128,causal=0,chip=sm_90a \
  --spec dtype=f16,head_dim=64,causal=1,chip=sm_80 \
  --spec dtype=f16,head_dim=128,causal=0,chip=sm_80
gcc -std=c11 -O2 -Wall -Wextra -Werror -I"$out" -I"$cuda/include" -c "$out/tessel_attention.c" \
  -o "$out/tessel_attention.o"
g++ -std=c++17 -O2 -Wall -Wextra -Werror -I"$out" -I"$cuda/include" "$here/main.cpp" \
  "$out/tessel_attention.o" -L"$cuda/lib64/stubs" -lcuda -lpthread -o "$out/attention_aot"
echo "built $out/attention_aot"
