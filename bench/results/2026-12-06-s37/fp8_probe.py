"""Which switch makes FP8 d128 at whole key blocks wrong? One FP8 call (test_fp8_gpu's
run_and_check: B2 H8 N1024 d128 bf16 out, non-causal) under one setting a process:
  python3 fp8_probe.py [FIELD=VALUE,...] [--no-even] [--grid] [--n N] [--overlap]
FIELD=VALUE are GpuOptions fields (as TESSEL_TEST_GPU_OPTIONS)."""
import os
import sys

args = sys.argv[1:]
opts = next((a for a in args if "=" in a), "")
if opts:
    os.environ["TESSEL_TEST_GPU_OPTIONS"] = opts
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../../test/gpu"))
import bench_decode  # noqa: E402,F401  (applies TESSEL_TEST_GPU_OPTIONS)
import torch  # noqa: E402
from tessel import grid  # noqa: E402
attention_module = sys.modules["tessel.attention"]
import test_fp8_gpu as t  # noqa: E402

attention_module.EVEN_KEYS = "--no-even" not in args
grid.PERSISTENT_GPU = "--grid" not in args
grid.FP8_OVERLAP_GPU = "--overlap" in args
n = int(args[args.index("--n") + 1]) if "--n" in args else 1024
print("EVEN_N kernel:", attention_module.even_keys(n, 128, attention_module.even_keys_allowed(False, None)))
try:
    t.run_and_check(torch.bfloat16, False, 2, 8, 8, n, n, 128, seed=7)
    print(f"PASS {' '.join(args)}")
except AssertionError as e:
    print(f"FAIL {' '.join(args)}: {str(e).splitlines()[0][:120]}")
