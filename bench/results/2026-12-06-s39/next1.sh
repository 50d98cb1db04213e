#!/usr/bin/env bash
# For the next session's first call: the GPU checks of this session's backward changes — the
# block-mask backward's dV/dK split at d256 (now the default) and the d256 candidate blocks
# (KEYROWS_DK_BLOCK_M = {256: 32}, FAST_DQ_BLOCKS_SM90 = {256: (64, 32)}), against float64;
# a causal block mask on the dense causal kernel (BlockMask.is_causal), bit for bit.
set -u
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/next1; mkdir -p $r
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
timeout 280 python3 -m pytest -q -p no:cacheprovider test/gpu/test_block_mask_gpu.py \
  -k "gradients_with_a_block_mask or dense_causal_kernel" 2>&1 | tail -15 \
  | tee $r/block_mask_grads.log
timeout 280 python3 -m pytest -q -p no:cacheprovider test/gpu/test_attention_backward_gpu.py \
  -k "d256_candidate or other_head_dims" 2>&1 | tail -15 | tee $r/d256.log
