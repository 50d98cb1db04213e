#!/usr/bin/env bash
# Thirty-seventh session: warp-specialized consumers read Q by descriptor, overlapped or not
# (ptxas 13.0 gave a register Q to P in the synchronous one-loop d128 kernel: FP8 d128 at whole
# key blocks wrong, 15 of test_fp8_gpu's 92). The FP8 suite, then the persistent suite's
# synchronous schedules (overlap_consumers=False, at 2500 and 4096 keys).
set -u
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/run2; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
timeout 100 python3 -m pytest -q -p no:cacheprovider test_fp8_gpu.py > $r/fp8.log 2>&1
echo "fp8 rc=$?"; grep -E "^FAILED|passed|failed" $r/fp8.log | tail -8
timeout 100 python3 -m pytest -q -p no:cacheprovider test_persistent_gpu.py -k "synchronous" \
  > $r/sync.log 2>&1
echo "sync rc=$?"; grep -E "^FAILED|passed|failed" $r/sync.log | tail -8
