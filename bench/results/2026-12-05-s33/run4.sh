#!/usr/bin/env bash
# Thirty-third session, last call: the 1-D vector loads (LSE, Δ) by a branch per register
# instead of a selected address (b: this build) against the build before (a: .bundle-a, the
# selected addresses, with the occupancy allowance). First b's GPU checks on ragged GQA
# shapes (plain and ALiBi, every dtype, d64/d128, causal and not) and d256; then
# bench_backward.py a and b at 4000 and 16384 tokens.
set -u
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
a=$(mktemp -d); cp -r $b/. $a/; rm -rf $a/python; tar -C $a -xJf .bundle-a/python.tar.xz; cp python/tessel/*.py $a/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
r=$OUT/run4; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache timeout 75 python3 -m pytest -q -p no:cacheprovider \
  test_attention_backward_gpu.py -k "(gqa-515x700 and (None or alibi)) or (other_head_dims and 256)" \
  > $r/backward.log 2>&1
echo "backward rc=$?"; grep -E "passed|failed|FAILED" $r/backward.log | tail -4
for side in a b; do
  d=$a; [ $side = b ] && d=$b
  PYTHONPATH=$d/python TESSEL_CACHE_DIR=$d/cache timeout 50 python3 bench_backward.py \
    --dims 64 128 --lengths 4000 16384 --json $r/bwd_$side.json 2>&1 \
    | grep -vE "^tessel:|peak memory" | sed "s/^/$side /" | tee -a $r/ab.log
done
