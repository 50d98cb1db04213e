#!/usr/bin/env bash
# Thirty-second session, fourth call. d256's registers by kernel form: a producer of 512-byte
# rows keeps 48 (then 56, consumers 224) where there is no tile loop; persistent kernels keep
# 40/232 (the causal one spilled at 224). And d256 with fuse_masked_loops (the split's two
# loops as one, the mask under a uniform branch: first call 0.85 -> 0.47 s here, causal and
# ragged; 0 spill): is it free at d256, where the softmax hides under 20 wgmma a block?
# Sides, rounds alternated, one process each: a = the build before this session
# (.bundle-base), b = this build, c = this build with TESSEL_TEST_GPU_OPTIONS
# fuse_masked_loops=True. Then the d256 GPU checks under c's option.
set -u
a=$(mktemp -d); tar -C $a -xJf .bundle-base/tessel-gpu.tar.xz
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
c=$b
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
r=$OUT/run4; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
for round in 1 2; do
  for side in a b c; do
    w=${!side}
    if [ $side = c ]; then export TESSEL_TEST_GPU_OPTIONS=fuse_masked_loops=True; x=f
    else unset TESSEL_TEST_GPU_OPTIONS; x=; fi
    PYTHONPATH=$w/python TESSEL_CACHE_DIR=$w/cache$x timeout 100 python3 bench_head_dims.py \
      --dims 256 --lengths 1000 4000 4096 16384 --json $r/d256_${side}_$round.json 2>&1 \
      | grep -E "^ 256|compiled" | sed "s/^/$side$round /" | tee -a $r/ab.log
  done
done
export PYTHONPATH=$b/python TESSEL_TEST_GPU_OPTIONS=fuse_masked_loops=True
suite() {  # suite NAME SECONDS FILE [ARGS...]
  local name=$1 s=$2; shift 2
  TESSEL_CACHE_DIR=$b/cache-$name timeout $s python3 -m pytest -q -p no:cacheprovider "$@" \
    > $r/$name.log 2>&1; echo "$name rc=$?" >> $r/rc.log
}
suite persistent 150 test_persistent_gpu.py -k "256" &
suite python 150 test_python_gpu.py -k "256" &
wait
cat $r/rc.log; for f in $r/persistent.log $r/python.log; do echo "== $f"; grep -E "passed|failed|FAILED|Error" $f | tail -6; done
