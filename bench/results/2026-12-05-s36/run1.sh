#!/usr/bin/env bash
# Thirty-sixth session, first call: tilegpu-drop-tma-fences (tessel.attention's tma_only
# kernels: no fence.proxy.async after the consumers' waits on rings only TMA fills; 6 -> 1 in
# the d128 lit kernel). First the bits (test_persistent_gpu: dense d64/d128 fp16/bf16, causal
# and not, GQA, ragged; the TMA layouts and views — against float32 and
# persistent against not bit for bit; a missing fence would show as a race), then tessel's
# speed alone (ab_gpu_options' child: dense d128 and d64 at 1k/4k/16k causal and not) with the build before (A: .bundle-base, HEAD's Python
# package) and after (B: .bundle + this tree), one process each, A B A B.
set -u
a=$(mktemp -d); tar -C $a -xJf .bundle-base/tessel-gpu.tar.xz
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
r=$OUT/run1; mkdir -p $r/ab
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache timeout 140 python3 -m pytest -q -p no:cacheprovider \
  test_persistent_gpu.py -k "(test_dense and not 256) or tma_producer_layouts" \
  > $r/bits.log 2>&1
echo "bits rc=$?"; tail -3 $r/bits.log
for round in 1 2; do
  for side in A B; do
    if [ $side = A ]; then w=$a; else w=$b; fi
    PYTHONPATH=$w/python TESSEL_CACHE_DIR=$w/cache timeout 80 python3 ab_gpu_options.py $r/ab \
      --child $side --json $r/ab/ab-$side-$round.json --cases dense d64 2>&1 | tail -2
  done
done
PYTHONPATH=$b/python python3 -c "
import sys; sys.argv=['x']; import ab_gpu_options as m
for c, (ma, mb, x, ra, rb) in m.summarize('$r/ab').items():
    print(f'{c:>22}  before {ma:7.1f}  after {mb:7.1f}  after/before {mb/ma:5.3f}  ({min(ra):.0f}-{max(ra):.0f} / {min(rb):.0f}-{max(rb):.0f})')
" | tee $r/ab.log
