#!/usr/bin/env bash
# Thirty-sixth session, first call: tilegpu-drop-tma-fences (tessel.attention's tma_only
# kernels: no fence.proxy.async after the consumers' waits on rings only TMA fills; 6 -> 1 in
# the d128 lit kernel). First the bits (test_persistent_gpu: dense fp16/bf16, causal and not,
# GQA, TMA layouts, block masks, against float32 and bit for bit between schedules; a missing
# fence would show as a race), then the speed of the build before (.bundle-base: HEAD's
# Python package) and after (.bundle + this tree), rounds alternated, one process each:
# d64 and d128 at 4k and 16k, causal and not (d256 has no TMA: unchanged). Then side t: the
# new build with TESSEL_XTMA=1, an uncommitted switch of this bundle that lets d256 take the
# TMA producer (tmaFitsBesideOverlap's estimate keeps it out; s32 run7 measured it -6 to -9 %
# in one round on an H100, with the fences), beside side b at d256.
set -u
a=$(mktemp -d); tar -C $a -xJf .bundle-base/tessel-gpu.tar.xz
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
r=$OUT/run1; mkdir -p $r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache timeout 200 python3 -m pytest -q -p no:cacheprovider \
  test_persistent_gpu.py -k "test_dense or tma or test_block_mask or even_keys" > $r/bits.log 2>&1
echo "bits rc=$?"; tail -3 $r/bits.log
for round in 1 2; do
  for side in a b; do
    w=${!side}
    PYTHONPATH=$w/python TESSEL_CACHE_DIR=$w/cache timeout 70 python3 bench_head_dims.py \
      --dims 64 128 --lengths 4096 16384 --json $r/ab_${side}_$round.json 2>&1 | tail -10 \
      | sed "s/^/$side$round /" | tee -a $r/ab.log
  done
done
for round in 1 2; do
  for side in b t; do
    if [ $side = t ]; then export TESSEL_XTMA=1; else unset TESSEL_XTMA; fi
    PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache$side timeout 60 python3 bench_head_dims.py \
      --dims 256 --lengths 4096 16384 --json $r/d256_${side}_$round.json 2>&1 | tail -6 \
      | sed "s/^/$side$round /" | tee -a $r/d256.log
  done
done
