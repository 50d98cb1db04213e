#!/usr/bin/env bash
# For a session with a GPU (not run in the thirty-fourth): backward.EVEN_CAUSAL — causal
# backward calls at whole blocks run the key-rows program without its bounds mask (ptxas: d128
# 340 → 104 bytes of spill, a quarter less PTX at d64 and d128; the spill of either form sits
# outside the loop below the diagonal, where the time goes: sass_loops.py). First the bits
# against the default (test_even_causal_keeps_the_gradients), then the speed, the two forms
# alternated in
# processes, two rounds (bench_backward.py prints causal and not; only causal differs). If
# causal wins at d64 and d128, EVEN_CAUSAL = True (and the ring's one-trace test needs its
# ragged and whole steps told apart: docs/ring.md).
set -u
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/run4; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
timeout 150 python3 -m pytest -q -p no:cacheprovider test_attention_backward_gpu.py \
  -k "even_causal" > $r/bits.log 2>&1
echo "bits rc=$?"; tail -3 $r/bits.log
for round in 1 2; do
  for side in off on; do
    flag=""; [ $side = on ] && flag=--even-causal
    timeout 150 python3 bench_backward.py --dims 64 128 --lengths 4096 16384 $flag \
      --json $r/bwd_${side}_$round.json 2>&1 | grep -vE "^tessel:|peak memory" \
      | sed "s/^/$side$round /" | tee -a $r/ab.log
  done
done
