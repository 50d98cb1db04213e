#!/usr/bin/env bash
# Twenty-ninth session (no machine lent): whole key blocks take one key loop (EVEN_N) — its
# bits against the general kernel and float32, its speed against the general kernel
# (attention.EVEN_KEYS=False) on the dense cases, and the cold compile on the host (full and
# long take EVEN_N now; ragged is the general kernel). Run after s28 run1.sh (the suites).
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run1; mkdir -p $r; cd test/gpu
timeout 200 python3 -m pytest -q -p no:cacheprovider test_persistent_gpu.py -k even_keys \
  2>&1 | tail -6 | tee $r/even_keys.log
# FlashAttention's window_size / softcap / alibi_slopes (tessel.attention, the serving APIs).
timeout 200 python3 -m pytest -q -p no:cacheprovider test_python_gpu.py test_serving_gpu.py \
  -k flash_arguments 2>&1 | tail -6 | tee $r/flash_arguments.log
timeout 330 python3 ab_gpu_options.py $r/ab --grid attention.EVEN_KEYS=False --cases dense d64 \
  --rounds 2 2>&1 | tail -14 | tee $r/ab.log
cd ../..; timeout 60 python3 scripts/bench_cold_compile.py --runs 2 --dims 128,64 \
  --kinds full,ragged --build $w 2>&1 | grep -E "^d|ptxas  |first_call" | tee $r/cold.log
