#!/usr/bin/env bash
# For the next session's first call (one 590 s call): the suites s38 did not run, four at a
# time (TESSEL_GPU_CHECK_JOBS, new in s38: its first run on a GPU host) — the backward suite
# above all (not finished inside s38's third call; not run whole since s35; its programs are
# not warp-specialized, so s37's Q rule does not reach them), the builtins, AOT beside the
# JIT, tile programs, the ring's one-GPU cases, atomics, sm_80 code.
cd "$(dirname "$0")/../../.."
TESSEL_GPU_CHECK_PLOTS=0 TESSEL_GPU_CHECK_JOBS=4 \
  TESSEL_GPU_CHECK_ONLY="backward_gpu builtins_gpu aot_vs_jit tile_programs ring_gpu atomic_add_gpu sm80_code_gpu" \
  timeout 580 bash scripts/gpu-check.sh
