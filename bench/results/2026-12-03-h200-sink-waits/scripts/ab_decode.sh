#!/usr/bin/env bash
# Decode with and without tilegpu-sink-waits, alternating processes (on, off, on, off), page 16:
# contiguous and paged rows at 1k, 8k, 64k keys beside cuDNN/FA2 in each process.
# Run from the repo root on the GPU machine with the bundle unpacked (PYTHONPATH set); $OUT.
set -uo pipefail
for i in 1 2; do
  python3 test/gpu/bench_decode.py --page 16 --splits --json "$OUT/decode_on_$i.json" 2>&1 | grep "bench_decode: nk"
  python3 test/gpu/bench_decode.py --page 16 --splits --no-sink-waits --json "$OUT/decode_off_$i.json" 2>&1 | grep "bench_decode: nk"
done
