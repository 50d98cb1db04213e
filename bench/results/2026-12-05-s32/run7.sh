#!/usr/bin/env bash
# Thirty-second session, seventh call: d256 with the TMA producer. convert-tile-to-mma's
# register estimate keeps TMA out of d256 (headroom under kTmaConsumerRegisters), but ptxas
# spills nothing with it in the non-persistent kernels (one loop, ragged, causal; the causal
# persistent one spills 24 bytes, so the fallback takes TMA back there). Side t: this build
# with TESSEL_XTMA=1, an uncommitted switch of this bundle that lets the estimate pass; side
# b: the same build without. Two rounds, one process each.
set -u
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python
r=$OUT/run7; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
for round in $(seq 1 ${ROUNDS:-2}); do
  for side in b t; do
    if [ $side = t ]; then export TESSEL_XTMA=1; else unset TESSEL_XTMA; fi
    TESSEL_CACHE_DIR=$b/cache$side timeout 80 python3 bench_head_dims.py --dims 256 \
      --lengths 1000 4096 16384 --json $r/d256_${side}_$round.json 2>&1 \
      | grep -E "^ 256|compiled" | sed "s/^/$side$round /" | tee -a $r/ab.log
  done
done
