#!/usr/bin/env python3
"""First compile of the shipped kernels that take compileModule's spill fallbacks.

    python3 scripts/bench_spill_fallbacks.py [--runs 3] [--cases document,...] [--build build]

The cases are test_spills.py's kernels that ptxas spills at first and compileModule compiles
again (lib/Target/SpillFallbacks.cpp): the persistent block-mask kernels of a document mask,
a window with a softcap, ALiBi and a relative bias (Q from the producer or not), and sm_80's
d128 128×64 kernel (three stages, as shipped; ragged keys). Each run compiles each case in
this process with an empty cache directory (cache.get_binary, the JIT's path) and prints its
wall time, how many compiles it took, what was given up and the sha256 of the cubin, so that
two builds can be compared for speed and for identical code (`--json FILE` writes them).
"""
import argparse
import hashlib
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def cases(np, tessel, tl):
    from tessel import blocksparse
    from tessel.attention import GPU_STAGES

    n = 1024
    doc = np.repeat(np.arange(4, dtype=np.int32), n // 4)[None, :]
    slopes = np.array([2.0 ** (-8.0 * (i + 1) / 2) for i in range(2)], np.float32)
    rel = (np.random.default_rng(1).standard_normal((2, 2 * n - 1)) * 0.5).astype(np.float32)

    def document(b, h, q_idx, kv_idx):
        return (doc[b, q_idx] == doc[b, kv_idx]) & (q_idx >= kv_idx)

    def window(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (q_idx - kv_idx < 300)

    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    def softcap(score, b, h, q_idx, kv_idx):
        return 30.0 * tl.tanh(score / 30.0)

    def alibi(score, b, h, q_idx, kv_idx):
        return score + slopes[h] * (kv_idx - q_idx)

    def rel_bias(score, b, h, q_idx, kv_idx):
        return score + rel[h, q_idx - kv_idx + n - 1]

    def block_mask_kernel(mask, score, options):
        x = np.zeros((1, 2, n, 128), np.float16)
        bm = tessel.block_mask(mask, 1 if mask is document else None, None, n, n, BLOCK_M=128,
                               BLOCK_N=128)
        args, cx, _, _, _ = blocksparse.prepare(x, x, x, None, score, mask, False, bm, 128, 128,
                                                False)
        k = blocksparse.block_sparse_attention_kernel.warmup(*args, **dict(cx, PERSISTENT=True))
        return k, dict(chip="sm_90a", **options)

    def sm80_d128():
        # Ragged keys: at whole key blocks (EVEN_N) the kernel keeps its scale fold, unspilled.
        q = np.zeros((1, 2, n, 128), np.float16)
        kv = np.zeros((1, 2, n - 24, 128), np.float16)
        k = tessel.compile_attention(q, kv, kv, causal=False, block_m=128, block_n=64)
        return k, dict(chip="sm_80", num_stages=GPU_STAGES[("sm_80", 128, 128, 64)])

    return {
        "document": lambda: block_mask_kernel(document, None, {}),
        "window-softcap": lambda: block_mask_kernel(window, softcap, {}),
        "alibi": lambda: block_mask_kernel(causal, alibi, {}),
        "alibi-producer-once": lambda: block_mask_kernel(causal, alibi,
                                                         {"producer_once": True}),
        "rel-bias": lambda: block_mask_kernel(causal, rel_bias, {}),
        "sm80-d128": sm80_d128,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cases", default="")
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    sys.path.insert(0, str(pathlib.Path(a.build).resolve() / "python"))
    os.environ.setdefault("TESSEL_QUIET", "1")
    import numpy as np
    import tessel
    import tessel.language as tl
    from tessel import cache

    table = cases(np, tessel, tl)
    names = a.cases.split(",") if a.cases else list(table)
    results = {}
    for name in names:
        kernel, options = table[name]()
        walls, first = [], None
        for _ in range(a.runs):
            cache._memory.clear()
            with tempfile.TemporaryDirectory() as directory:
                t = time.perf_counter()
                b = cache.get_binary(kernel, cache.GpuOptions(**options), directory=directory)
                walls.append(time.perf_counter() - t)
            compiles = 1 + sum(1 for n, _ in b.timings if n.startswith("compile again"))
            one = {"compiles": compiles, "given_up": b.manifest.get("given_up", []),
                   "spill_bytes": b.manifest["spill_bytes"],
                   "cubin_sha256": hashlib.sha256(b.cubin).hexdigest()[:16]}
            assert first is None or one == first, (name, first, one)
            first = one
        results[name] = dict(first, wall_min=min(walls), wall_median=statistics.median(walls))
        print(f"{name:22s} {results[name]['wall_median']:6.2f} s (min "
              f"{results[name]['wall_min']:.2f})  {compiles} compiles  spill "
              f"{first['spill_bytes']}  gave up {', '.join(first['given_up']) or '-'}  "
              f"cubin {first['cubin_sha256']}", flush=True)
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
