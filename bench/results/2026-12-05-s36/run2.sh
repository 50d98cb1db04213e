#!/usr/bin/env bash
# Thirty-sixth session (not run: no device machine was lent): d256 with the TMA producer
# against the default (a cp.async producer), tessel alone (ab_gpu_options' child: d256
# 1k/4k/16k causal and not, ragged 1000/4000/16000), one process each, B A B A; then the
# host's cold compile of d256 with and without. Side A sets TESSEL_XTMA=1, the uncommitted
# switch of xtma.patch beside this script (apply it before scripts/gpu-bundle.sh, then
# revert), which lets tmaFitsBesideOverlap pass. The thirty-second session's run7 measured
# TMA at d256 -6 to -9 % in one round on an H100, before the synchronous masked loops; here
# it compiles with 0 spill, first call 0.78 -> 0.69 s (causal, this machine).
set -u
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python
r=$OUT/run2; mkdir -p $r/ab
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $r/gpu.txt
cd test/gpu
for round in 1 2; do
  for side in B A; do     # A: TMA forced, B: the default
    if [ $side = A ]; then export TESSEL_XTMA=1; else unset TESSEL_XTMA; fi
    TESSEL_CACHE_DIR=$b/cache$side timeout 60 python3 ab_gpu_options.py $r/ab \
      --child $side --json $r/ab/ab-$side-$round.json --cases d256 ragged256 2>&1 | tail -2
  done
done
python3 -c "
import sys; sys.argv=['x']; import ab_gpu_options as m
for c, (ma, mb, x, ra, rb) in m.summarize('$r/ab').items():
    print(f'{c:>22}  tma {ma:7.1f}  cp.async {mb:7.1f}  tma/cp.async {x:5.3f}  ({min(ra):.0f}-{max(ra):.0f} / {min(rb):.0f}-{max(rb):.0f})')
" | tee $r/ab.log
cd ../..
unset TESSEL_XTMA
timeout 40 python3 scripts/bench_cold_compile.py --runs 2 --dims 256 --kinds causal,full \
  --build $b 2>&1 | grep -E "^d256|ptxas  |first_call" | tee $r/cold.log
TESSEL_XTMA=1 timeout 40 python3 scripts/bench_cold_compile.py --runs 2 --dims 256 \
  --kinds causal,full --build $b 2>&1 | grep -E "^d256|ptxas  |first_call" | tee $r/cold_tma.log
