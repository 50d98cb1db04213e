#!/usr/bin/env bash
# Run 6 (2026-12-04, nineteenth session): the TMA producer again after run 5's hang (LLVM had
# given lane 0 its own copy of the `.sync.aligned` tensormap fence: the map is now built without
# a branch inside the warp) — its correctness tests, then one round of the interleaved A/B.
set -u
step() { local name=$1 t=$2; shift 2; echo "== $name"; timeout "$t" "$@" > "$OUT/$name.log" 2>&1; echo "rc=$?" >> "$OUT/$name.log"; tail -14 "$OUT/$name.log"; }
step tma_tests 100 python3 -m pytest -q -x -p no:cacheprovider test_persistent_gpu.py -k "tma"
step ab 160 bash ../../bench/results/2026-12-04-h200-s19/ab_tma.sh "$OUT" 1
