#!/usr/bin/env bash
# One call for what this session needs most (its device time went to failed starts), most
# important first, the call's limit cutting the tail: on an H200 issue 16's sweep (fp16, then
# bf16; two rounds a row) around the seqused_k check; on an H100 seqused_k over packed k and v
# (turned on by the tests), tessel.flash / flex / patch_sdpa, then s51's run3 (AUTO_BLOCK_MASK).
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run3; mkdir -p $r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.limit --format=csv \
  | tee $r/gpu.txt
export TESSEL_CACHE_DIR=$(mktemp -d)
cd test/gpu
sweep() {
  timeout 115 python3 bench_head_dims.py --dims 64 128 256 --lengths 4096 16384 --rounds 2 \
    --dtype $1 --json $r/dims_$1.json 2>&1 | tail -14 | tee $r/dims_$1.log
}
seqused() {
  timeout 140 python3 -m pytest -q -p no:logging -n 8 test_serving_gpu.py -k seqused \
    --junitxml $r/seqused.xml > $r/seqused.log 2>&1; tail -2 $r/seqused.log
  python3 ../../scripts/junit_summary.py $r/seqused.xml 2>&1 | tail -3
}
drop_ins() {
  timeout 110 python3 -m pytest -q -p no:logging -n 8 test_flash_gpu.py test_flex_gpu.py \
    test_sdpa_gpu.py --junitxml $r/drop_ins.xml > $r/drop_ins.log 2>&1; tail -2 $r/drop_ins.log
  python3 ../../scripts/junit_summary.py $r/drop_ins.xml 2>&1 | tail -3
}
if grep -q H200 $r/gpu.txt; then
  sweep fp16; seqused; sweep bf16; drop_ins
  exit 0
fi
seqused; drop_ins
timeout 60 python3 -m pytest -q -p no:logging test_torch_compile_gpu.py -k document \
  > $r/compile.log 2>&1; grep -v DEBUG $r/compile.log | tail -2
timeout 160 python3 -c "import tessel.backward as b; b.AUTO_BLOCK_MASK = True; import pytest; \
pytest.main(['-q', '-p', 'no:logging', '-n', '8', 'test_block_mask_gpu.py', \
'--junitxml', '$r/masks.xml'])" > $r/masks.log 2>&1; tail -2 $r/masks.log
python3 ../../scripts/junit_summary.py $r/masks.xml 2>&1 | tail -3
