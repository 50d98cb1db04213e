#!/usr/bin/env bash
# Thirty-second session, fifth call: a loop whose every block evaluates its mask (a block-sparse
# kernel's partial blocks) is marked a masked loop ("mixed", tile-split-masked-loops) and left
# synchronous beside the full blocks' overlapped loop (tilegpu-overlap-consumers), as the
# split's boundary loops are: the document mask compiles once (0 spill, TMA, the scale fold and
# the overlap of its full blocks kept) where it took 7 compiles and gave all three up. A/B of
# the seven masks beside FlexAttention, a = the build before (.bundle-base), b = this build,
# rounds alternated; then the block-mask GPU suite on b.
set -u
a=$(mktemp -d); tar -C $a -xJf .bundle-base/tessel-gpu.tar.xz
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
r=$OUT/run5; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
for round in 1 2; do
  for side in a b; do
    w=${!side}
    PYTHONPATH=$w/python TESSEL_CACHE_DIR=$w/cache timeout 130 python3 bench_block_mask.py \
      --json $r/masks_${side}_$round.json 2>&1 | grep -vE "^tessel: compiling" \
      | sed "s/^/$side$round /" | tee -a $r/ab.log
  done
done
PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache-bm timeout 150 python3 -m pytest -q \
  -p no:cacheprovider test_block_mask_gpu.py > $r/block_mask.log 2>&1
echo "block_mask rc=$?"; grep -E "passed|failed|FAILED|Error" $r/block_mask.log | tail -8
