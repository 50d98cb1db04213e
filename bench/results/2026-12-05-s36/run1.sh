#!/usr/bin/env bash
# Thirty-sixth session (not run: no device machine was lent): GpuOptions.drop_tma_fences
# (tilegpu-drop-tma-fences: with tma_only, no fence.proxy.async after the consumers' waits on
# rings only TMA fills; 6 -> 1 in the d128 lit kernel). First the bits with it on for every
# kernel (TESSEL_TEST_GPU_OPTIONS: test_persistent_gpu's dense d64/d128 fp16/bf16, causal and
# not, GQA, ragged, TMA layouts and views, block masks — against float32, persistent against
# not bit for bit; a missing fence would show as a race), then its speed against the default,
# one configuration a process (ab_gpu_options: dense d128 and d64 at 1k/4k/16k causal and
# not, the document/window/ALiBi block masks). If the bits pass and A/B >= 1 within the
# rounds' noise: default on (cache.py, Pipeline.h, the pass option's default) and the GPU
# suites on it.
set -u
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/run1; mkdir -p $r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
TESSEL_TEST_GPU_OPTIONS=drop_tma_fences=True timeout 200 python3 -m pytest -q -p no:cacheprovider \
  test_persistent_gpu.py -k "(test_dense and not 256) or tma_producer_layouts or test_block_mask" \
  > $r/bits.log 2>&1
echo "bits rc=$?"; tail -3 $r/bits.log
timeout 380 python3 ab_gpu_options.py $r/ab --set drop_tma_fences=True --cases dense d64 masks \
  --rounds 2 --timeout 90 2>&1 | tee $r/ab.log | tail -20
