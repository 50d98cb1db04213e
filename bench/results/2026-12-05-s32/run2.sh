#!/usr/bin/env bash
# Thirty-second session: d256 non-causal with whole key blocks takes the one-loop EVEN_N kernel
# (its cp.async producer keeps 56 registers, the consumers 224; was the split at 40/232). A/B
# of the build before (.bundle-base, its own Python) and after (.bundle + this tree's Python):
# bench_head_dims at d256, rounds alternated, one process each (the GPU checks: run3.sh).
# Side c: the new build with TESSEL_XSYNC=1, an uncommitted switch of that bundle only: d256's
# masked loops (causal diagonal, ragged key tail) left synchronous as d128's (80 -> 60 wgmma).
# Ran on an H100 (out/run2): the new build's causal persistent kernel spilled at 224/56 and
# gave its overlap up (b, c); fixed before run3.sh.
set -u
a=$(mktemp -d); tar -C $a -xJf .bundle-base/tessel-gpu.tar.xz
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
c=$b
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
r=$OUT/run2; mkdir -p $r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
for round in 1 2; do
  for side in a b c; do
    w=${!side}
    if [ $side = c ]; then export TESSEL_XSYNC=1; x=1; else unset TESSEL_XSYNC; x=; fi
    PYTHONPATH=$w/python TESSEL_CACHE_DIR=$w/cache$x timeout 90 python3 bench_head_dims.py \
      --dims 256 --lengths 1024 4096 16384 --json $r/d256_${side}_$round.json 2>&1 | tail -7 \
      | sed "s/^/$side$round /" | tee -a $r/ab.log
  done
done
