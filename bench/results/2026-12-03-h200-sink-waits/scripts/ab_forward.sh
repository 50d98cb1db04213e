#!/usr/bin/env bash
# tessel.attention forward with and without tilegpu-sink-waits (fp16, d64/d128, 4k/16k, causal
# and not), then the backward, one process each, beside cuDNN/FA2 in each process.
set -uo pipefail
python3 test/gpu/bench_head_dims.py --dims 64 128 --json "$OUT/fwd_on.json" 2>&1 | tail -12
python3 test/gpu/bench_head_dims.py --dims 64 128 --no-sink-waits --json "$OUT/fwd_off.json" 2>&1 | tail -12
if [ "${AB_BACKWARD:-1}" = 1 ]; then
  python3 test/gpu/bench_backward.py --dims 128 --json "$OUT/bwd_on.json" 2>&1 | tail -8
  python3 test/gpu/bench_backward.py --dims 128 --no-sink-waits --json "$OUT/bwd_off.json" 2>&1 | tail -8
fi
