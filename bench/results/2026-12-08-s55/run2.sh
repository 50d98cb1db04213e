#!/usr/bin/env bash
# tilegpu-skip-masked-warpgroups (GpuOptions.skip_masked_warpgroups, off): its GPU checks
# (test_skip_masked_warpgroups: the default's bits and float32; d64's schedules with it) and
# the builtins added with it (test_builtins_gpu.py whole: the scans, sin, cos, umulhi on every
# dtype, a 512-long scan, Philox's bits and floats), then
# its A/B in alternating processes (ab_gpu_options.py: d64 and d128, 1k / 4k / 16k, causal and
# not; tessel alone, do_bench medians).
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run2; mkdir -p $r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.limit --format=csv \
  | tee $r/gpu.txt
export TESSEL_CACHE_DIR=$(mktemp -d)
cd test/gpu
junit() { python3 ../../scripts/junit_summary.py $1 2>&1 | tail -3; }
timeout 120 python3 -m pytest -q -p no:logging -n 4 test_persistent_gpu.py \
  -k "skip_masked or (d64_schedules and skip)" --junitxml $r/checks.xml > $r/checks.log 2>&1
tail -2 $r/checks.log; junit $r/checks.xml
timeout 150 python3 -m pytest -q -p no:logging -n 4 test_builtins_gpu.py \
  --junitxml $r/builtins.xml > $r/builtins.log 2>&1
tail -2 $r/builtins.log; junit $r/builtins.xml
timeout 330 python3 ab_gpu_options.py $r/ab --set skip_masked_warpgroups=True --cases d64 dense \
  --rounds 2 --timeout 80 2>&1 | tail -16 | tee $r/ab.log
