#!/usr/bin/env bash
# One call for what this session needs most (its device time went to failed starts): on an
# H200 issue 16's sweep (fp16 + bf16, two rounds a row), else s51's run3 (AUTO_BLOCK_MASK's
# check); on both seqused_k over packed k and v (turned on by the tests) and tessel.flash.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run3; mkdir -p $r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.limit --format=csv \
  | tee $r/gpu.txt
export TESSEL_CACHE_DIR=$(mktemp -d)
cd test/gpu
if grep -q H200 $r/gpu.txt; then
  for dt in fp16 bf16; do
    timeout 115 python3 bench_head_dims.py --dims 64 128 256 --lengths 4096 16384 --rounds 2 \
      --dtype $dt --json $r/dims_$dt.json 2>&1 | tail -14 | tee $r/dims_$dt.log
  done
fi
timeout 140 python3 -m pytest -q -p no:logging -n 8 test_serving_gpu.py -k seqused \
  --junitxml $r/seqused.xml > $r/seqused.log 2>&1; tail -2 $r/seqused.log
python3 ../../scripts/junit_summary.py $r/seqused.xml 2>&1 | tail -3
timeout 110 python3 -m pytest -q -p no:logging -n 8 test_flash_gpu.py test_flex_gpu.py test_sdpa_gpu.py \
  --junitxml $r/flash.xml > $r/flash.log 2>&1; tail -2 $r/flash.log
python3 ../../scripts/junit_summary.py $r/flash.xml 2>&1 | tail -3
grep -q H200 $r/gpu.txt && exit 0
timeout 60 python3 -m pytest -q -p no:logging test_torch_compile_gpu.py -k document \
  > $r/compile.log 2>&1; grep -v DEBUG $r/compile.log | tail -2
timeout 160 python3 -c "import tessel.backward as b; b.AUTO_BLOCK_MASK = True; import pytest; \
pytest.main(['-q', '-p', 'no:logging', '-n', '8', 'test_block_mask_gpu.py', \
'--junitxml', '$r/masks.xml'])" > $r/masks.log 2>&1; tail -2 $r/masks.log
python3 ../../scripts/junit_summary.py $r/masks.xml 2>&1 | tail -3
