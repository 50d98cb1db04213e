#!/usr/bin/env bash
# Run 5 (2026-12-04, nineteenth session): the TMA producer (GpuOptions(tma_producer)) —
# correctness (bit for bit against the default, and a float32 reference), then the interleaved
# A/B against the cp.async producer; then the same A/B without the cp.async fallback inside
# the TMA-marked copies (TMA_NOFALLBACK=1, a measurement-only switch: its producer spills
# nothing).
set -u
step() { local name=$1 t=$2; shift 2; echo "== $name"; timeout "$t" "$@" > "$OUT/$name.log" 2>&1; echo "rc=$?" >> "$OUT/$name.log"; tail -14 "$OUT/$name.log"; }
step persistent 240 python3 -m pytest -q -x -p no:cacheprovider test_persistent_gpu.py -k "schedules or tma"
step ab 330 bash ../../bench/results/2026-12-04-h200-s19/ab_tma.sh "$OUT" 2
mkdir -p "$OUT/nofb"
export TMA_NOFALLBACK=1
step ab_nofb 200 bash ../../bench/results/2026-12-04-h200-s19/ab_tma.sh "$OUT/nofb" 1
