#!/usr/bin/env bash
# The session's last device time (~200 s): on an H200 issue 16's sweep (fp16, bf16; one
# round a row); elsewhere the seqused_k check, then the drop-ins' tests as far as the limit
# lets them run.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run4; mkdir -p $r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv | tee $r/gpu.txt
export TESSEL_CACHE_DIR=$(mktemp -d)
cd test/gpu
if grep -q H200 $r/gpu.txt; then
  for dt in fp16 bf16; do
    timeout 95 python3 bench_head_dims.py --dims 64 128 256 --lengths 4096 16384 \
      --dtype $dt --json $r/dims_$dt.json 2>&1 | tail -14 | tee $r/dims_$dt.log
  done
  exit 0
fi
timeout 140 python3 -m pytest -q -p no:logging -n 8 test_serving_gpu.py -k seqused \
  --junitxml $r/seqused.xml > $r/seqused.log 2>&1; tail -2 $r/seqused.log
python3 ../../scripts/junit_summary.py $r/seqused.xml 2>&1 | tail -3
timeout 100 python3 -m pytest -q -p no:logging -n 8 test_flash_gpu.py test_sdpa_gpu.py \
  --junitxml $r/drop_ins.xml > $r/drop_ins.log 2>&1; tail -2 $r/drop_ins.log
