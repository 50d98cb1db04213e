#!/usr/bin/env bash
# Written in the twenty-fifth session (no device machine): the sm_80 d128 defaults it chose on
# ptxas' word (0 spill), on the H200 as sm_80 cubins. One device call (< 600 s):
# test_sm80_code_gpu.py (d64/d128/d256, causal or not, softcap / window, against float32), then
# sm80_ab.py, one configuration a process, two rounds: three stages against two at 128x64
# (plain); with mods 64x64 against 128x64 and 128x32.
set -u
w=$(mktemp -d); tar -C $w -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $w/python/tessel/
export PYTHONPATH=$w/python PATH=$w/bin:/usr/local/cuda/bin:$PATH TESSEL_CACHE_DIR=$w/cache PYTHONUNBUFFERED=1
r=$OUT/run3; mkdir -p $r; s=bench/results/2026-12-04-h200-s25
(cd test/gpu && timeout 200 python3 -m pytest -q -p no:cacheprovider test_sm80_code_gpu.py 2>&1 | tail -8) | tee $r/sm80_tests.log
for round in 1 2; do for c in default two_stages mods_128x64 mods_128x32; do
  timeout 60 python3 $s/sm80_ab.py $c --json $r/ab_${c}_$round.json 2>&1 | tail -12 | tee -a $r/ab.log
done; done
tar -C $OUT -czf $OUT/run3.tgz run3
