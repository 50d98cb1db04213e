#!/usr/bin/env bash
# Twenty-seventh session: GpuOptions(fuse_masked_loops) (tilegpu-fuse-masked-loops: a key
# loop's unmasked and masked copies as one loop, the mask under a uniform branch; half the
# code and half the cold compile) — correctness. The persistent schedules against the default
# (within a few ulps) and float32, then the block-mask and Python suites with every kernel
# compiled under the switch (TESSEL_TEST_GPU_OPTIONS), against their references.
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run3; mkdir -p $r
cd test/gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $r/gpu.txt
timeout 150 python3 -m pytest -q -p no:cacheprovider test_persistent_gpu.py -k fused 2>&1 | tail -8 | tee $r/persistent.log
export TESSEL_TEST_GPU_OPTIONS=fuse_masked_loops=True
timeout 170 python3 -m pytest -q -p no:cacheprovider test_block_mask_gpu.py 2>&1 | tail -8 | tee $r/block_mask.log
timeout 240 python3 -m pytest -q -p no:cacheprovider test_python_gpu.py 2>&1 | tail -8 | tee $r/python.log
tar -C $OUT -czf $OUT/run3.tgz run3
