#!/usr/bin/env bash
# After run3: the mods-in-the-graph GPU case again (failed in run3 on Python 3.12: the mod went
# outside the graph) with a diagnosis, bench_sdpa.py with the masks' mods by broadcast pattern
# and kept per mask tensor, and the compiled training's step time (its log did not come back).
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run4; mkdir -p $r
export TESSEL_CACHE_DIR=$(mktemp -d)
cd test/gpu
python3 - > $r/diag.log 2>&1 <<'PY'
import sys, torch, tessel
from tessel import torch_mods, language as tl
cap = 20.0
f = lambda s, b, h, i, j: cap * tl.tanh(s / cap)
print("python", sys.version.split()[0], "eager key", torch_mods.mods_key(None, None),
      torch_mods.mods_key(f, None), "parts", torch_mods._function_parts(f) is not None,
      "kwdefaults", f.__kwdefaults__, "module", f.__module__)
PY
cat $r/diag.log
timeout 120 python3 -m pytest -q -p no:logging test_torch_compile_gpu.py test_sdpa_gpu.py \
  -k "mods_in_the_graph or sdpa_drop_in or document or padding" > $r/tests.log 2>&1
grep -v DEBUG $r/tests.log | grep -E "^E  .*(Error|Unsupported)|passed|failed" | head -8
for bw in "" --backward; do timeout 50 python3 bench_sdpa.py $bw --json $r/sdpa${bw:+_bwd}.json \
  2>&1 | grep -v W12 | tail -7 | tee $r/sdpa${bw:+_bwd}.log; done
cd ../..
timeout 45 python3 examples/python/train_gpt.py --steps 60 --compile 2>&1 \
  | grep -E "step time|OK|FAILED" | tee $r/train_compiled.log
