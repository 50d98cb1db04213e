#!/usr/bin/env bash
# Run 1 (2026-12-04, nineteenth session): the TMA probe, the backward's 64x128 split key-rows
# program beside the default, head dims 64/256 at two block shapes. From test/gpu, with the
# bundle's tessel on PYTHONPATH; writes under $OUT.
set -u
step() { local name=$1 t=$2; shift 2; echo "== $name"; timeout "$t" "$@" > "$OUT/$name.log" 2>&1; echo "rc=$?" >> "$OUT/$name.log"; tail -25 "$OUT/$name.log"; }
step tma_probe 90 python3 tma_probe.py
step switches 180 python3 -m pytest -q -x -p no:cacheprovider test_attention_backward_gpu.py -k switches
step bwd_default 200 python3 bench_backward.py --dims 128 --lengths 4096 16384 --json "$OUT/bwd_default.json"
step bwd_split128 200 python3 bench_backward.py --dims 128 --lengths 4096 16384 --keyrows-blocks 64x128 --split-keyrows 128 256 --json "$OUT/bwd_split128.json"
step head_dims 240 python3 bench_head_dims.py --dims 64 256 --lengths 1024 4096 16384 --sweep 128x128 128x32 --json "$OUT/head_dims.json"
