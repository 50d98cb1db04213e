#!/usr/bin/env bash
# even64.py under each GpuOptions switch that could matter (one process each).
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
for o in "" overlap_consumers=False warp_specialize=False sink_waits=False vector_stores=False \
    tma_producer=False drop_tma_fences=False sync_masked_loops=False occupancy_hints=False \
    num_stages=3 spill_fallbacks=False; do
  timeout 60 python3 bench/results/2026-12-06-s43/even64.py "$o" 2>&1 \
    | grep -v "^tessel: comp"
done | tee $OUT/even64.log
mkdir -p $OUT/cache; find $b/cache -name "*.ptx" -newer $b/bin -size -2M | head -40 | xargs -I{} cp {} $OUT/cache/ 2>/dev/null; ls $OUT/cache | head
