"""Every config of gemm.CONFIGS launched directly at 4096³ (and the autotuned host function),
beside cuBLAS, in the order cuBLAS, tessel, tessel, cuBLAS per row (each the better of its
two do_bench medians); JSON to $OUT/gemm_configs.json.

    OUT=. python3 gemm_configs.py [MxNxK ...]     # tessel importable (PYTHONPATH)
"""
import json, os, pathlib, sys
ROOT = pathlib.Path(__file__).resolve().parents[4]
sys.path[:0] = [str(ROOT / "examples" / "python"), str(ROOT / "test" / "gpu")]
import torch
from bench_decode import make_timer
import gemm
from _common import cdiv


timed, _ = make_timer(torch)              # do_bench median


def abba(ours, theirs):
    t = [timed(theirs)]
    o = [timed(ours), timed(ours)]
    t.append(timed(theirs))
    return min(o), min(t), o, t


shapes = [tuple(map(int, s.split("x"))) for s in sys.argv[1:]] or [(4096, 4096, 4096)]
rows = []
for M, N, K in shapes:
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    flop = 2.0 * M * N * K
    want = torch.matmul(a, b).float()
    cands = [("tuned", lambda: gemm.matmul(a, b))]
    for c in gemm.CONFIGS:
        BM, BN, BK = c.kwargs["BM"], c.kwargs["BN"], c.kwargs["BK"]
        k = gemm.matmul_kernel.with_options(num_stages=c.num_stages)

        def call(k=k, BM=BM, BN=BN, BK=BK):
            out = torch.empty(M, N, device="cuda", dtype=torch.float16)
            k[cdiv(M, BM) * cdiv(N, BN)](a, b, out, a, M, N, K, BM=BM, BN=BN, BK=BK,
                                         HAS_BIAS=False, ACTIVATION="")
            return out
        cands.append((f"{BM}x{BN}x{BK}/{c.num_stages}", call))
    for name, fn in cands:
        got = fn().float()
        err = ((got - want).abs().max() / want.abs().max()).item()
        o, t, oe, te = abba(fn, lambda: torch.matmul(a, b))
        row = dict(shape=[M, N, K], config=name, tessel_ms=o, cublas_ms=t, tessel_each=oe,
                   cublas_each=te, tessel_tflops=flop / o / 1e9, cublas_tflops=flop / t / 1e9,
                   ratio=t / o, diff=err)
        if name == "tuned":
            row["chosen"] = repr(gemm.matmul_tuned.best_config)
        rows.append(row)
        print(f"{M}x{N}x{K} {name:>16} {row['tessel_tflops']:7.1f} {row['cublas_tflops']:7.1f} "
              f"{row['ratio']:.3f} diff {err:.1e} {row.get('chosen', '')}", flush=True)
json.dump(dict(device=torch.cuda.get_device_name(0), rows=rows),
          open(os.path.join(os.environ.get("OUT", "."), "gemm_configs.json"), "w"), indent=1)
