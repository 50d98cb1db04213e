#!/usr/bin/env python3
"""Cold compile of tessel.attention's kernel, in fresh processes with an empty cache directory.

    python3 scripts/bench_cold_compile.py [--runs 5] [--dims 64,128] [--kinds causal,full]
        [--build build] [--set FIELD=VALUE ...] [--switch NAME=VALUE ...]

Each run is a new interpreter that imports tessel, traces the kernel with numpy fp16 inputs
(`tessel.compile_attention(q, q, q, causal=..., ...)` with the blocks tessel.attention takes on
sm_90a: "causal" short causal rows, the 64-row kernels; "full" non-causal, at d128 the
128×128 warp-specialized kernel; "long" non-causal from 4096 keys, at d64 the 192×128 kernel
of three consumer warpgroups — both with whole key blocks (no key-tail mask: EVEN_N);
"ragged" as "full" but with 4000 keys, at d128 the same kernel (the last key block first,
TAIL_FIRST), elsewhere the general kernel with the key tail's masked loop; "causal-long"
causal from 4096 keys, at d128 the 128×128 kernel) and compiles it for sm_90a with the
GpuOptions a launch takes (`kernel.options.gpu_options("sm_90a")`, e.g. tessel.attention's
tma_only, and --set's fields), with TESSEL_TIMING=1 and a fresh
TESSEL_CACHE_DIR. Prints, per head dim and kind, the minimum and the median of every step of
the breakdown (tessel/timing.py) and of the first call (trace + binary, what the GPU benchmark
calls the cold compile). A build without the breakdown gives the totals only.
"""
import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]

CHILD = r'''
import sys, time
t0 = time.perf_counter()
import numpy as np
import tessel
t1 = time.perf_counter()
import json, importlib
for name, value in json.loads(sys.argv[4]).items():      # --switch: tessel.attention's
    setattr(importlib.import_module("tessel.attention"), name, value)
D, causal = int(sys.argv[1]), sys.argv[2].startswith("causal")
nk = 4096 if sys.argv[2] in ("long", "causal-long") else 128
q = np.zeros((1, 1, 128, D), np.float16)
kv = np.zeros((1, 1, 4000, D), np.float16) if sys.argv[2] == "ragged" else q
from tessel.attention import gpu_blocks
bm, bn = gpu_blocks(D, "f16", nk, nk, "sm_90a", unmasked=not causal,   # the H200's blocks
                    causal=causal, mods=False)
k = tessel.compile_attention(q, kv, kv, causal=causal, block_m=bm, block_n=bn)
t2 = time.perf_counter()
import json
import dataclasses    # what a launch compiles: the kernel's options, then --set's fields
b = k.binary(dataclasses.replace(k.options.gpu_options("sm_90a"), **json.loads(sys.argv[3])))
t3 = time.perf_counter()
assert b.source == "compiled", b.source
print(f"RESULT import={t1 - t0:.6f} compile_attention={t2 - t1:.6f} binary={t3 - t2:.6f} first_call={t3 - t1:.6f}")
'''


def one_run(build, dim, kind, fields, switches):
    with tempfile.TemporaryDirectory() as cache_dir:
        env = dict(os.environ, PYTHONPATH=str(build / "python"), TESSEL_CACHE_DIR=cache_dir,
                   TESSEL_TIMING="1")
        r = subprocess.run([sys.executable, "-c", CHILD, str(dim), kind, json.dumps(fields),
                            json.dumps(switches)],
                           capture_output=True, text=True, env=env, timeout=600)
    if r.returncode:
        sys.exit(f"run failed:\n{r.stderr}")
    steps = {}
    for line in r.stderr.splitlines():
        m = re.match(r"  (\S.*?)\s+([0-9.]+) ms", line)
        if m and m.group(1) not in ("import tessel", "total"):
            steps[m.group(1)] = steps.get(m.group(1), 0.0) + float(m.group(2)) / 1000
    totals = dict(kv.split("=") for kv in r.stdout.split("RESULT ")[1].split())
    return steps, {k: float(v) for k, v in totals.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--kinds", default="causal,full")
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="a GpuOptions field for the kernel (True/False or an int), e.g. "
                         "fuse_masked_loops=True")
    ap.add_argument("--switch", action="append", default=[], metavar="NAME=VALUE",
                    help="a tessel.attention setting, e.g. DIAGONAL_BLOCK_FIRST=True")
    a = ap.parse_args()
    build = pathlib.Path(a.build).resolve()
    sys.path.insert(0, str(ROOT / "test" / "gpu"))
    from set_fields import parse_set      # the GPU benchmarks' --set
    try:
        fields, switches = parse_set(a.set), parse_set(a.switch)
    except ValueError as e:
        ap.error(f"--set: {e}")
    for dim, kind in [(int(d), k) for d in a.dims.split(",") for k in a.kinds.split(",")]:
        runs = [one_run(build, dim, kind, fields, switches) for _ in range(a.runs)]
        print(f"d{dim}, {kind}, tessel.attention's blocks, sm_90a, {a.runs} fresh processes "
              "(ms: min / median)")
        names = list(runs[0][0])
        for name in names + ["-"] + list(runs[0][1]):
            if name == "-":
                print("  " + "-" * 40)
                continue
            vals = [r[1][name] if name in r[1] else r[0].get(name, 0.0) for r in runs]
            print(f"  {name:<22} {min(vals) * 1000:8.1f} / {statistics.median(vals) * 1000:8.1f}")


if __name__ == "__main__":
    main()
