#!/usr/bin/env bash
# Thirty-second session, first call: where the defaults stand against issue 16's bars, in one
# process per dtype: d64/d128/d256 at 1k, 4k and 16k tokens, causal and not, fp16 and bf16,
# beside cuDNN and FA2; then the seven masks beside FlexAttention; then the host's cold compile.
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run1; mkdir -p $r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee $r/gpu.txt
cd test/gpu
for dt in fp16 bf16; do
  timeout 170 python3 bench_head_dims.py --dims 64 128 256 --lengths 1024 4096 16384 --dtype $dt \
    --json $r/dims_$dt.json 2>&1 | tail -22 | tee $r/dims_$dt.log
done
timeout 200 python3 bench_block_mask.py --json $r/masks.json 2>&1 | tail -14 | tee $r/masks.log
cd ../..
timeout 90 python3 scripts/bench_cold_compile.py --runs 2 --dims 64,128,256 --build $w 2>&1 \
  | tee $r/cold.log | tail -30     # the whole table kept (s34's run kept only its last 30 lines)
