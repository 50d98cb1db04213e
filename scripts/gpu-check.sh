#!/usr/bin/env bash
# The GPU check, on the GPU machine (from the repo root, with .bundle/ carried there):
# unpack the bundle → run the examples and the ahead-of-time program → check attention on the GPU
# against float64/float32 references and against the interpreter, benchmark it side by side with
# PyTorch SDPA (the mma.sync path, then the sm_90a wgmma path: ~2.5 min more) → the Python DSL on
# CUDA tensors (test/gpu/test_python_gpu.py) and its launch overhead (test/gpu/bench_launch.py) →
# print a short table last; JSON results, one log (gpu-check.log) and a plot of the speed tables
# (speed.png) under $OUT (or build/gpu-check).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/build/gpu-check}
work=$(mktemp -d)
mkdir -p "$out"
tar -C "$work" -xJf "$root/.bundle/tessel-gpu.tar.xz" || { echo "no bundle: run scripts/gpu-bundle.sh"; exit 1; }
# The Python sources are the checkout's (a bundle packed before a Python edit ran the old code:
# s40 lost a call to it); the binaries are the bundle's, so say so when their sources differ.
cp "$root"/python/tessel/*.py "$work/python/tessel/"
if [ "$(cat "$work/python/native-sources.hash" 2>/dev/null)" != "$(bash "$root/scripts/native-sources-hash.sh")" ]; then
  echo "WARNING: the bundle's binaries were built from other C++ sources than this checkout's:" \
    "run scripts/gpu-bundle.sh again"
fi
export PATH="$work/bin:/usr/local/cuda/bin:$PATH" CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export PYTHONUNBUFFERED=1
export PYTHONPATH="$work/python${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi -L
failed=()
logs="$work/logs"
mkdir -p "$logs"
# One log comes back (the device tool returns at most 8 files): every part appends to it.
# TESSEL_GPU_CHECK_SKIP="name ..." leaves parts out (to spend less device time on a re-check);
# TESSEL_GPU_CHECK_ONLY="name ..." runs those parts alone (one device call's share of the check).
# Each part says how long it took (plan device calls by it).
# TESSEL_GPU_CHECK_JOBS=N runs the pytest suites N at a time (they compile more than they run:
# the host's cores bound them, not the GPU), each suite's log appended whole when it ends;
# every other part waits for them and runs alone, so the timings have the GPU to themselves.
# TESSEL_GPU_CHECK_SHARDS=M with it runs each suite as M shards side by side (suite below).
jobs_max=${TESSEL_GPU_CHECK_JOBS:-1}
running=() pids=()
wanted() {  # wanted NAME: whether SKIP and ONLY leave part NAME in
  case " ${TESSEL_GPU_CHECK_SKIP:-} " in *" $1 "*) echo "== $1: skipped"; return 1;; esac
  if [ -n "${TESSEL_GPU_CHECK_ONLY:-}" ]; then
    case " $TESSEL_GPU_CHECK_ONLY " in *" $1 "*) ;; *) return 1;; esac
  fi
}
drain() {  # waits for the suites in the background, appends their logs, remembers failures
  [ ${#running[@]} -eq 0 ] && return
  wait
  local name
  for name in "${running[@]}"; do
    echo "== $name ($(cat "$logs/$name.secs" 2>/dev/null) s)" | tee -a "$out/gpu-check.log"
    tee -a "$out/gpu-check.log" < "$logs/$name.log"
    [ "$(cat "$logs/$name.rc" 2>/dev/null)" = 0 ] || failed+=("$name")
  done
  running=() pids=()
}
cut_off() {  # on TERM/INT (the device call's timeout): the suites' logs so far, then stop
  trap - TERM INT
  local name
  for name in "${running[@]}"; do
    echo "== $name (cut off)" | tee -a "$out/gpu-check.log"
    tee -a "$out/gpu-check.log" < "$logs/$name.log"
  done
  kill "${pids[@]}" 2>/dev/null
  exit 124
}
trap cut_off TERM INT
running_count() {  # how many background suites are still running
  local pid n=0
  for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && n=$((n + 1)); done
  echo $n
}
step() {  # step NAME COMMAND...: runs one part alone, keeps its log, remembers a failure
  local name=$1; shift
  wanted "$name" || return 0
  drain
  echo "== $name" | tee -a "$out/gpu-check.log"
  local start=$SECONDS
  "$@" 2>&1 | tee "$logs/$name.log" | tee -a "$out/gpu-check.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || failed+=("$name")
  echo "== $name: $((SECONDS - start)) s" | tee -a "$out/gpu-check.log"
}
tests() {  # tests NAME COMMAND...: a correctness part, beside others with TESSEL_GPU_CHECK_JOBS
  local name=$1; shift
  if [ "$jobs_max" -le 1 ]; then step "$name" "$@"; return; fi
  wanted "$name" || return 0
  # (not `jobs -rp` in a command substitution: the subshell's job table is not kept current)
  while [ "$(running_count)" -ge "$jobs_max" ]; do wait -n; done
  echo "== $name: started"
  ( start=$SECONDS; "$@" > "$logs/$name.log" 2>&1; echo $? > "$logs/$name.rc"
    echo $((SECONDS - start)) > "$logs/$name.secs" ) &
  running+=("$name") pids+=($!)
}
pytest_file() {  # pytest_file FILE [ARG...]: one test/gpu file on the shared kernel cache; a
  # file that skips itself whole (test_sm80_code_gpu.py off compute capability 8.x) passes,
  # where pytest says 5 ("no tests ran") after the module-level skip, as does a file whose
  # TESSEL_GPU_SHARD shard is empty (every test deselected)
  local log rc
  log=$(mktemp)
  env TESSEL_CACHE_DIR="$work/cache" python3 -m pytest -q -p no:cacheprovider \
    "$root/test/gpu/$1" "${@:2}" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  if [ "$rc" -eq 5 ] && grep -qE " (skipped|deselected)" "$log"; then rc=0; fi
  rm -f "$log"
  return "$rc"
}
shard_file() {  # shard_file I/N FILE: pytest_file on shard I of N (TESSEL_GPU_SHARD)
  TESSEL_GPU_SHARD=$1 pytest_file "$2"
}
suite() {  # suite NAME FILE: one test/gpu pytest file as a part. With TESSEL_GPU_CHECK_SHARDS=N
  # (and JOBS > 1): N parts NAME.0 … NAME.N-1, every N-th test each, side by side — a suite's
  # first compiles take the host's cores (the backward suite needs ~30 min in one process)
  local n=${TESSEL_GPU_CHECK_SHARDS:-1} i
  if [ "$n" -le 1 ] || [ "$jobs_max" -le 1 ]; then tests "$1" pytest_file "$2"; return; fi
  wanted "$1" || return 0
  for ((i = 0; i < n; i++)); do
    TESSEL_GPU_CHECK_ONLY="" TESSEL_GPU_CHECK_SKIP="" tests "$1.$i" shard_file "$i/$n" "$2"
  done
}
step examples python3 "$root/test/gpu/run_examples.py" "$work/cubin"
step aot "$work/bin/attention_aot"
suite aot_vs_jit test_aot_vs_jit.py
# (an assignment before a function call holds for the call and the commands it runs)
TESSEL_GPU_RESULTS="$out/python_gpu.json" tests python_gpu pytest_file test_python_gpu.py \
  --junitxml "$logs/python_gpu.xml"
suite builtins_gpu test_builtins_gpu.py
suite backward_gpu test_attention_backward_gpu.py
suite captured_gpu test_captured_gpu.py
suite block_mask_gpu test_block_mask_gpu.py
suite persistent_gpu test_persistent_gpu.py
# FP8 ships its own kernels (attention_fp8.py): left out of this list until 2026-12-06, when a
# wrong FP8 d128 kernel had gone a day unnoticed (docs/bench/2026-12-06-h100-s37.md).
suite fp8_gpu test_fp8_gpu.py
suite atomic_add_gpu test_atomic_add_gpu.py
# One GPU: the ring's world of one rank and its merge program (the two-GPU runs skip).
suite ring_gpu test_ring_gpu.py
# sm_80 cubins load on compute capability 8.x only: skipped on the H100/H200.
suite sm80_code_gpu test_sm80_code_gpu.py
suite serving_gpu test_serving_gpu.py
suite tile_programs test_tile_programs_gpu.py
# torch.compile (the entry points as custom ops) and the SDPA drop-in.
suite torch_compile_gpu test_torch_compile_gpu.py
suite sdpa_gpu test_sdpa_gpu.py
suite flex_gpu test_flex_gpu.py
suite flash_gpu test_flash_gpu.py
step sweep python3 "$root/test/gpu/check_sweep.py" --tessel-run "$work/bin/tessel-run" \
  --json "$out/sweep.json"
speed_tables() {  # speed_tables SUFFIX TESSEL_RUN: the mma.sync and wgmma tables of one
  # tessel-run, parts and JSON named with SUFFIX. TESSEL_GPU_CHECK_OVERLAP=1: the wgmma table
  # again with FA3's overlap (tilegpu-overlap-wgmma): every correctness case with
  # --wgmma-overlap, each speed row with and without it.
  local suffix=$1 run=$2
  step "attention_mma$suffix" python3 "$root/test/gpu/check_attention_mma.py" \
    --tessel-run "$run" --json "$out/attention_mma$suffix.json"
  step "attention_wgmma$suffix" python3 "$root/test/gpu/check_attention_wgmma.py" \
    --tessel-run "$run" --json "$out/attention_wgmma$suffix.json" --budget-s 200
  if [ "${TESSEL_GPU_CHECK_OVERLAP:-0}" = 1 ]; then
    step "attention_wgmma_overlap$suffix" python3 "$root/test/gpu/check_attention_wgmma.py" \
      --tessel-run "$run" --json "$out/attention_wgmma_overlap$suffix.json" --budget-s 200 \
      --overlap
  fi
}
speed_tables "" "$work/bin/tessel-run"
step bench_block_mask env TESSEL_CACHE_DIR="$work/cache" python3 "$root/test/gpu/bench_block_mask.py" \
  --json "$out/bench_block_mask.json"
step bench_backward env TESSEL_CACHE_DIR="$work/cache" python3 "$root/test/gpu/bench_backward.py" \
  --json "$out/bench_backward.json" ${TESSEL_BENCH_BACKWARD_ARGS:-}
step train_gpt env TESSEL_CACHE_DIR="$work/cache" python3 "$root/examples/python/train_gpt.py" \
  --json "$out/train_gpt.json"
step bench_decode env TESSEL_CACHE_DIR="$work/cache" python3 "$root/test/gpu/bench_decode.py" \
  --json "$out/bench_decode.json"
step bench_varlen env TESSEL_CACHE_DIR="$work/cache" python3 "$root/test/gpu/bench_varlen.py" \
  --json "$out/bench_varlen.json"
step bench_head_dims env TESSEL_CACHE_DIR="$work/cache" python3 "$root/test/gpu/bench_head_dims.py" \
  --dims 64 128 256 --json "$out/bench_head_dims.json"
# TESSEL_GPU_CHECK_OCCUPANCY=1: the head-dim and backward tables again without the occupancy
# step (GpuOptions(occupancy_hints=False): ptxas' first register allocation), same process kind.
if [ "${TESSEL_GPU_CHECK_OCCUPANCY:-0}" = 1 ]; then
  step bench_head_dims_no_hints env TESSEL_CACHE_DIR="$work/cache" python3 \
    "$root/test/gpu/bench_head_dims.py" --dims 64 128 256 --no-occupancy-hints \
    --json "$out/bench_head_dims_no_hints.json"
  step bench_backward_no_hints env TESSEL_CACHE_DIR="$work/cache" python3 \
    "$root/test/gpu/bench_backward.py" --no-occupancy-hints --json "$out/bench_backward_no_hints.json"
fi
step bench_tile_programs env TESSEL_CACHE_DIR="$work/cache" python3 \
  "$root/test/gpu/bench_tile_programs.py" --json "$out/bench_tile_programs.json"
step launch env TESSEL_CACHE_DIR="$work/cache" python3 "$root/test/gpu/bench_launch.py" \
  --json "$out/launch.json"
# In-kernel TMA's tensor-map field values (docs/dev/notes/2026-12-04-tma-ptx.md): seconds.
step tma_probe python3 "$root/test/gpu/tma_probe.py"
# The cold compile on this host, step by step (fresh processes, empty caches; compile only).
step cold_compile python3 "$root/scripts/bench_cold_compile.py" --runs 5 --build "$work"
# TESSEL_GPU_CHECK_BEFORE=FILE (a stripped tessel-run of an earlier build, or FILE.xz): the two
# speed tables again with it, in the same run, beside the same cuDNN and FA2 (before/after).
if [ -n "${TESSEL_GPU_CHECK_BEFORE:-}" ]; then
  before="$work/bin/tessel-run-before"
  case "$TESSEL_GPU_CHECK_BEFORE" in
    *.xz) xz -dc "$TESSEL_GPU_CHECK_BEFORE" > "$before" ;;
    *) cp "$TESSEL_GPU_CHECK_BEFORE" "$before" ;;
  esac
  chmod +x "$before"
  speed_tables _before "$before"
fi
if [ "${TESSEL_GPU_CHECK_REFERENCE:-0}" = 1 ]; then
  step attention_reference python3 "$root/test/gpu/check_attention.py" \
    --tessel-run "$work/bin/tessel-run" --json "$out/attention.json"
fi

drain    # suites still in the background (TESSEL_GPU_CHECK_ONLY of suites alone)

# The speed tables as a plot (scripts/bench_plots.py), where matplotlib is installed: one
# speed.png beside the JSON (one file: the device tool returns at most 8). Off with
# TESSEL_GPU_CHECK_PLOTS=0, and with TESSEL_GPU_CHECK_BEFORE, whose JSON fill those 8. Once the
# results are under bench/results/RUN, `python3 scripts/bench_plots.py bench/results/RUN` makes
# the plots of docs/bench/img/RUN/ from them.
if [ "${TESSEL_GPU_CHECK_PLOTS:-1}" != 0 ] && [ -z "${TESSEL_GPU_CHECK_BEFORE:-}" ] \
   && python3 -c "import matplotlib" 2>/dev/null; then
  python3 "$root/scripts/bench_plots.py" "$out" --single -o "$out" 2>&1 | tee -a "$out/gpu-check.log"
fi

echo
echo "== summary"
grep -sh -A20 '^| d | n | causal | block' "$logs/attention_mma.log" | grep '^|'
grep -sh -A20 '^| d | n | causal | wgmma' "$logs/attention_wgmma.log" | grep '^|'
grep -sh -A20 '^| d | n | causal | wgmma' "$logs/attention_wgmma_overlap.log" | grep '^|' \
  | sed "s/^/overlap /"
for part in attention_mma_before attention_wgmma_before attention_wgmma_overlap_before; do
  grep -sh -A20 '^| d | n | causal | ' "$logs/$part.log" | grep '^|' | sed "s/^/$part /"
done
grep -h -E 'passed, [0-9]+ failed|^n=4096|passed in|µs' "$logs"/*.log | head -30
grep -sh -E '^d[0-9]+, |first_call' "$logs/cold_compile.log"
grep -sh 'reproduces the box' "$logs/tma_probe.log"
echo "${#failed[@]} parts failed${failed:+: ${failed[*]}}"
[ ${#failed[@]} -eq 0 ]
