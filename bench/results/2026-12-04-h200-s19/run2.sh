#!/usr/bin/env bash
# Run 2 (2026-12-04, nineteenth session): bf16's element type code for the in-kernel tensor map;
# the backward's GPU tests; its speed beside FA2 and cuDNN again, fp16 and bf16 (issue 11's bar).
set -u
step() { local name=$1 t=$2; shift 2; echo "== $name"; timeout "$t" "$@" > "$OUT/$name.log" 2>&1; echo "rc=$?" >> "$OUT/$name.log"; tail -12 "$OUT/$name.log"; }
step tma_probe 120 python3 tma_probe.py
step bwd_bf16 200 python3 bench_backward.py --dims 128 --lengths 4096 16384 --dtype bf16 --json "$OUT/bwd_bf16.json"
step bwd_fp16 200 python3 bench_backward.py --dims 64 128 --lengths 4096 16384 --json "$OUT/bwd_fp16.json"
step backward_gpu 330 python3 -m pytest -q -p no:cacheprovider test_attention_backward_gpu.py
