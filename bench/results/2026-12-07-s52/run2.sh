#!/usr/bin/env bash
# s51's run3: attention_backward's CUDA calls with a mask that reads tensors taking the
# forward's automatic block mask (backward.AUTO_BLOCK_MASK, off until this passes): the
# compiled document-mask case (bit for bit against eager autograd; it turns the switch on),
# then the block-mask suite whole with it on (pytest-xdist: read the junit file). Then
# test_flex_gpu.py (its drop-in example under torch.compile: and_masks(causal, document) now in
# the graph, on this host's torch) and test_flash_gpu.py (tessel.flash).
set -u
cd "$(dirname "$0")/../../.."
source scripts/bundle-env.sh
r=$OUT/run2; mkdir -p $r
export TESSEL_CACHE_DIR=${TESSEL_CACHE_DIR:-$(mktemp -d)}
cd test/gpu
timeout 100 python3 -m pytest -q -p no:logging test_torch_compile_gpu.py -k document \
  > $r/compile.log 2>&1; grep -v DEBUG $r/compile.log | tail -2
timeout 200 python3 -c "import tessel.backward as b; b.AUTO_BLOCK_MASK = True; import pytest; \
pytest.main(['-q', '-p', 'no:logging', '-n', '8', 'test_block_mask_gpu.py', \
'--junitxml', '$r/masks.xml'])" > $r/masks.log 2>&1; tail -3 $r/masks.log
python3 ../../scripts/junit_summary.py $r/masks.xml 2>&1 | tail -5
timeout 170 python3 -m pytest -q -p no:logging -n 4 test_flex_gpu.py test_flash_gpu.py \
  > $r/flex.log 2>&1
grep -v DEBUG $r/flex.log | tail -3
