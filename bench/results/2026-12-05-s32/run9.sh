#!/usr/bin/env bash
# Not run yet (written in the thirty-second session after its device time was spent): the
# backward's key-rows and dQ programs without their bounds mask at whole-block lengths
# (backward.even_blocks, EVEN; on by default, checked bit for bit against the masked form on
# the interpreter; its first compile at d128 1.16 -> 0.66 s here, one thread). First the
# backward GPU suite (its float64 checks run whole-block lengths and ragged ones), then the
# speed with EVEN (b) and without (a: backward.EVEN_BLOCKS = False), alternated, two rounds,
# and the first backward call on the host.
set -u
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python
r=$OUT/run9; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
TESSEL_CACHE_DIR=$b/cache-t timeout 300 python3 -m pytest -q -p no:cacheprovider \
  test_attention_backward_gpu.py > $r/backward.log 2>&1
echo "backward rc=$?"; grep -E "passed|failed|FAILED" $r/backward.log | tail -6
for round in 1 2; do
  for side in a b; do
    TESSEL_CACHE_DIR=$b/cache-$side timeout 100 python3 -c "
import sys, runpy
import tessel.backward as bw
bw.EVEN_BLOCKS = '$side' == 'b'
sys.argv = ['bench_backward.py', '--dims', '64', '128', '--lengths', '4096', '16384',
            '--json', '$r/bwd_${side}_$round.json']
runpy.run_path('bench_backward.py', run_name='__main__')" 2>&1 | grep -vE "^tessel:" \
      | sed "s/^/$side$round /" | tee -a $r/ab.log
  done
done
cd ../..
timeout 60 python3 scripts/bench_backward_compile.py --runs 2 --dims 128 --build $b 2>&1 \
  | tee $r/backward_compile.log
