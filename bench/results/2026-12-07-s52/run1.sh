#!/usr/bin/env bash
# Fifty-second session, first call. On an H200 first: issue 16's sweep beside cuDNN and FA2
# (fp16 + bf16). Then attention_varlen's seqused_k over packed k and v (forward and gradients,
# serving_checks.PACKED_SEQUSED_CUDA turned on by the tests). run2.sh next.
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run1; mkdir -p $r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.limit --format=csv \
  | tee $r/gpu.txt
export TESSEL_CACHE_DIR=$(mktemp -d)
cd test/gpu
if grep -q H200 $r/gpu.txt; then
  for dt in fp16 bf16; do
    timeout 165 python3 bench_head_dims.py --dims 64 128 256 --lengths 4096 16384 --rounds 3 \
      --dtype $dt --json $r/dims_$dt.json 2>&1 | tail -10 | tee $r/dims_$dt.log
  done
fi
timeout 180 python3 -m pytest -q -p no:logging -n 8 test_serving_gpu.py -k seqused \
  --junitxml $r/seqused.xml > $r/seqused.log 2>&1; tail -3 $r/seqused.log
python3 ../../scripts/junit_summary.py $r/seqused.xml 2>&1 | tail -5
