#!/usr/bin/env bash
# Thirty-third session, first call after run9/run8 of s32: the key-rows program without mods
# and without a bounds mask at any length (b) against the session start's backward.py (a,
# bench/results/2026-12-05-s33/a_backward.py, made by `git show 9b1741f:python/tessel/backward.py`,
# not committed): a subset of the backward GPU
# suite with b (mod None at every dtype/shape, other head dims, the switches, fused dQ), then
# speed a/b at ragged and whole lengths, two rounds; then d256 at 128x80 beside 128x64 at
# lengths run8 did not run.
set -u
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
a=$(mktemp -d); cp -r $b/. $a/; cp bench/results/2026-12-05-s33/a_backward.py $a/python/tessel/backward.py
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
r=$OUT/run1; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache timeout 220 python3 -m pytest -q -p no:cacheprovider \
  test_attention_backward_gpu.py -k "None or other_head_dims or switches or fused" > $r/backward.log 2>&1
echo "backward rc=$?"; grep -E "passed|failed|FAILED" $r/backward.log | tail -6
for round in 1 2; do
  for side in a b; do
    d=$a; [ $side = b ] && d=$b
    PYTHONPATH=$d/python TESSEL_CACHE_DIR=$d/cache timeout 120 python3 bench_backward.py \
      --dims 64 128 --lengths 4000 4096 16000 --json $r/bwd_${side}_$round.json 2>&1 \
      | grep -vE "^tessel:|peak memory" | sed "s/^/$side$round /" | tee -a $r/ab.log
  done
done
PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache timeout 120 python3 bench_head_dims.py --dims 256 \
  --lengths 2048 8192 12288 16000 --sweep 128x80 --json $r/d256.json 2>&1 | grep -E "^ +256|d " \
  | tee $r/d256.log
