#!/usr/bin/env bash
# For the next session with a GPU (not run in the thirty-fourth: no machine was lent after
# run2): GpuOptions.rescale_under_s — O's rescale made beside the next S's wgmma. First the
# bits against the default (test_persistent_gpu.py: every producer schedule with it, d256 and
# short d128 kernels), then its speed against the default, one configuration a process
# (ab_gpu_options.py: dense d128 and d256, causal and not, 1k/4k/16k, ragged d256). run2's
# bound: without the multiplies at all, d256 +5 to +8 %, d128 16k +3 % on the H200.
# If it wins: the sweep beside cuDNN with it, `TESSEL_TEST_GPU_OPTIONS=rescale_under_s=True
# bash bench/results/2026-12-05-s32/run1.sh` (every benchmark applies the variable), then
# its default to True (cache.py, Pipeline.h, Passes.td's convert-tile-to-mma option) and the
# GPU suites on it. d64's consumers are synchronous by default (nothing changes there); FA3's
# d64 schedule (late_p, measured −3 to −4 % in s26) may change with it: `ab_gpu_options.py OUT
# --set late_p=True --set tma_producer=False --set rescale_under_s=True --cases d64`.
set -u
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/run3; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
timeout 150 python3 -m pytest -q -p no:cacheprovider test_persistent_gpu.py \
  -k "rescale or producer_schedules_dense" > $r/bits.log 2>&1
echo "bits rc=$?"; tail -3 $r/bits.log
timeout 420 python3 ab_gpu_options.py $r/ab --set rescale_under_s=True \
  --cases dense d256 ragged256 --rounds 2 2>&1 | tee $r/ab.log | tail -30
