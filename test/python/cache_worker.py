"""A process of the kernel cache tests: compiles small kernels through the disk cache.

    python cache_worker.py DSL_FILE CHIP BLOCK [COUNT]

loads DSL_FILE (it defines `scale`), compiles COUNT specialisations (BLOCK, BLOCK*2, ...) for
CHIP through tessel.cache (the cache directory and faults come from the environment) and prints
one JSON line: the keys, the cubins' SHA-256, where each came from and the CacheWarnings.
"""
import hashlib
import importlib.util
import json
import sys
import warnings

import dsl_helpers  # noqa: F401  (puts the built package on sys.path)
import numpy as np

from tessel import cache

path, chip, block = sys.argv[1], sys.argv[2], int(sys.argv[3])
count = int(sys.argv[4]) if len(sys.argv) > 4 else 1
spec = importlib.util.spec_from_file_location("cache_dsl", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
x = np.zeros(1, np.float32)
out = {"keys": [], "sha": [], "source": [], "warnings": []}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for i in range(count):
        kernel = module.scale.warmup(x, x, 1, 1.0, BLOCK=block << i)
        b = kernel.binary(cache.GpuOptions(chip=chip))
        out["keys"].append(b.key)
        out["sha"].append(hashlib.sha256(b.cubin).hexdigest())
        out["source"].append(b.source)
out["warnings"] = [str(w.message) for w in caught if issubclass(w.category, cache.CacheWarning)]
print(json.dumps(out))
