#!/usr/bin/env python3
"""Cold compile of the backward's programs (Δ, key-rows dK/dV, dQ) for sm_90a, as a first CUDA
backward call compiles them (backward._compile_programs), in fresh processes with an empty
cache directory.

    python3 scripts/bench_backward_compile.py [--runs 3] [--dims 128] [--threads 1,0]
        [--build build] [--switch NAME=VALUE ...]

Each run is a new interpreter that traces the programs with numpy fp16 stand-ins (the fast
paths' blocks, the dQ program's own on sm_90a) and compiles them with
TESSEL_COMPILE_THREADS=N (0: the default, the hardware threads up to 8). Prints the minimum
and median seconds per head dim, causal or not, and thread count. --switch sets a
tessel.backward global in each run first (e.g. EVEN_CAUSAL=True). Needs ptxas, not a GPU.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]

CHILD = r'''
import json, sys, time
import numpy as np
from tessel import backward
for name, value in json.loads(sys.argv[3]).items():       # --switch
    setattr(backward, name, value)
from tessel.backward import (FAST_BACKWARD_BLOCKS, FAST_DQ_BLOCKS_SM90, _config, _run,
                             _with_blocks)
D, causal = int(sys.argv[1]), sys.argv[2] == "causal"
x = np.zeros((1, 2, 256, D), np.float16)
row = np.zeros((1, 2, 256), np.float32)
shapes, scale, cx = _config(x, x, x, causal, None, None, None, False, *FAST_BACKWARD_BLOCKS[D])
dq_cx = _with_blocks(cx, FAST_DQ_BLOCKS_SM90.get(D))


def programs(launch, side=None):
    _run(x, x, x, x, row, x, row, row, x, x, x, shapes, scale, cx, keyrows=True, dq_cx=dq_cx,
         launch=launch, chip="sm_90a")
t = time.perf_counter()
backward._compile_programs("sm_90a", programs, ("f16", tuple(cx.items()), tuple(dq_cx.items())))
print(f"RESULT {time.perf_counter() - t:.6f}")
'''


def one_run(build, dim, kind, threads, switches):
    with tempfile.TemporaryDirectory() as cache_dir:
        env = dict(os.environ, PYTHONPATH=str(build / "python"), TESSEL_CACHE_DIR=cache_dir)
        env.pop("TESSEL_COMPILE_THREADS", None)
        if threads:
            env["TESSEL_COMPILE_THREADS"] = str(threads)
        r = subprocess.run([sys.executable, "-c", CHILD, str(dim), kind, json.dumps(switches)],
                           capture_output=True, text=True, env=env, timeout=600)
    if r.returncode:
        sys.exit(f"run failed:\n{r.stderr}")
    return float(r.stdout.split("RESULT ")[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dims", default="128")
    ap.add_argument("--threads", default="1,0")
    ap.add_argument("--build", type=pathlib.Path, default=ROOT / "build")
    ap.add_argument("--switch", action="append", default=[], metavar="NAME=VALUE",
                    help="a tessel.backward global set in each run (True/False/ints)")
    args = ap.parse_args()
    switches = {}
    for item in args.switch:
        name, _, text = item.partition("=")
        switches[name] = {"True": True, "False": False}.get(text, int(text) if text.isdigit()
                                                            else text)
    for dim in (int(d) for d in args.dims.split(",")):
        for kind in ("full", "causal"):
            for threads in (int(t) for t in args.threads.split(",")):
                times = [one_run(args.build, dim, kind, threads, switches)
                         for _ in range(args.runs)]
                print(f"d{dim} {kind:6s} threads={threads or 'default'}: "
                      f"min {min(times):.2f} s, median {statistics.median(times):.2f} s")


if __name__ == "__main__":
    main()
