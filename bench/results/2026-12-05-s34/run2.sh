#!/usr/bin/env bash
# Thirty-fourth session: how much skipping O's rescale could buy (cubin_bound.py): the dense
# non-causal d128 / d256 kernels' cubins from s33's PTX, with and without the key loop's
# in-place O·alpha multiplies (strip_rescale.py). The cubins (bound/, not kept) were made here:
# s33's PTX of the two kernels (their CompiledKernel's binary), `ptxas -arch=sm_90a` for b128 /
# b256, and the same after strip_rescale.py for nr128 / nr256.
set -u
b=$(mktemp -d); tar -C $b -xJf .bundle/tessel-gpu.tar.xz; cp python/tessel/*.py $b/python/tessel/
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python TESSEL_CACHE_DIR=$b/cache
r=$OUT/run2; mkdir -p $r; s=bench/results/2026-12-05-s34
nvidia-smi --query-gpu=name --format=csv,noheader | tee $r/gpu.txt
python3 $s/cubin_bound.py 128 $s/bound/b128.cubin $s/bound/nr128.cubin --rounds 2 | tee $r/d128.log
python3 $s/cubin_bound.py 256 $s/bound/b256.cubin $s/bound/nr256.cubin --rounds 2 | tee $r/d256.log
