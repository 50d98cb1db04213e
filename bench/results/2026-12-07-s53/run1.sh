#!/usr/bin/env bash
# The fifty-third session's call, most important first (the call's limit cuts the tail):
# on an H200 issue 16's sweep (fp16, then bf16; two rounds a row) around the seqused_k check,
# then d64 causal at 128x128 with the diagonal block first (checked against float32, timed
# beside the default 192x128), the drop-ins' GPU tests; on an H100 the checks first
# (seqused_k, the drop-ins, d64 128x128), s51's AUTO_BLOCK_MASK check, then the d64 timing.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run1; mkdir -p $r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.limit --format=csv \
  | tee $r/gpu.txt
export TESSEL_CACHE_DIR=$(mktemp -d)
cd test/gpu
junit() { python3 ../../scripts/junit_summary.py $1 2>&1 | tail -3; }
sweep() {
  timeout 115 python3 bench_head_dims.py --dims 64 128 256 --lengths 4096 16384 --rounds 2 \
    --dtype $1 --json $r/dims_$1.json 2>&1 | tail -14 | tee $r/dims_$1.log
}
seqused() {
  timeout 140 python3 -m pytest -q -p no:logging -n 8 test_serving_gpu.py -k seqused \
    --junitxml $r/seqused.xml > $r/seqused.log 2>&1; tail -2 $r/seqused.log; junit $r/seqused.xml
}
d64_check() {
  timeout 90 python3 -m pytest -q -p no:logging -n 8 test_persistent_gpu.py \
    -k diagonal_block_first_d64 --junitxml $r/d64.xml > $r/d64.log 2>&1; tail -2 $r/d64.log
  junit $r/d64.xml
}
d64_time() {
  timeout 80 python3 bench_head_dims.py --dims 64 --lengths 4096 16384 --sweep 128x128 \
    --json $r/d64_128.json 2>&1 | tail -6 | tee $r/d64_128.log
}
drop_ins() {
  timeout 110 python3 -m pytest -q -p no:logging -n 8 test_flash_gpu.py test_flex_gpu.py \
    test_sdpa_gpu.py --junitxml $r/drop_ins.xml > $r/drop_ins.log 2>&1; tail -2 $r/drop_ins.log
  junit $r/drop_ins.xml
}
if grep -q H200 $r/gpu.txt; then
  sweep fp16; seqused; sweep bf16; d64_check; d64_time; drop_ins
  exit 0
fi
seqused; drop_ins; d64_check
timeout 130 python3 -c "import tessel.backward as b; b.AUTO_BLOCK_MASK = True; import pytest; \
pytest.main(['-q', '-p', 'no:logging', '-n', '8', 'test_block_mask_gpu.py', \
'--junitxml', '$r/masks.xml'])" > $r/masks.log 2>&1; tail -2 $r/masks.log; junit $r/masks.xml
d64_time
