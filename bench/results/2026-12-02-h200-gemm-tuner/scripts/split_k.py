"""Skinny GEMMs by split-K (gemm.matmul_split_k) beside the autotuned gemm.matmul and cuBLAS,
TFLOP/s (do_bench median; cuBLAS timed before and after, the better kept), fp16; errors
against float64. JSON to $OUT/split_k.json.

    OUT=. python3 split_k.py      # tessel importable (PYTHONPATH)
"""
import json, os, pathlib, sys
ROOT = pathlib.Path(__file__).resolve().parents[4]
sys.path[:0] = [str(ROOT / "examples" / "python"), str(ROOT / "test" / "gpu")]
import torch
import gemm
from bench_decode import make_timer, warm_up

timed, _ = make_timer(torch)          # do_bench median
warm_up(torch)
rows = []
for M, N, K in ((16, 8192, 8192), (64, 8192, 8192), (32, 4096, 4096), (16, 8192, 1024)):
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    ref = a.double() @ b.double()
    flop = 2.0 * M * N * K
    first = timed(lambda: torch.matmul(a, b))
    cands = [("tuned", lambda: gemm.matmul(a, b))]
    for sk in (2, 4, 8, 16):
        for blocks in ((64, 64, 64), (64, 128, 64)):
            cands.append((f"split {sk} {blocks[1]}", lambda sk=sk, blocks=blocks:
                          gemm.matmul_split_k(a, b, split_k=sk, blocks=blocks)))
    for name, f in cands:
        try:
            err = ((f().double() - ref).abs().max() / ref.abs().max()).item()
            ms = timed(f)
            row = dict(shape=[M, N, K], variant=name, ms=ms, tflops=flop / ms / 1e9, err=err)
        except Exception as e:  # noqa: BLE001
            row = dict(shape=[M, N, K], variant=name, error=str(e).splitlines()[0][:200])
        rows.append(row)
    cublas = min(first, timed(lambda: torch.matmul(a, b)))
    for row in rows:
        if row["shape"] == [M, N, K]:
            row["cublas_tflops"] = flop / cublas / 1e9
            print(f"{M}x{N}x{K} {row['variant']:>14}: {row.get('tflops', 0):6.1f} TFLOP/s "
                  f"(cuBLAS {flop / cublas / 1e9:.1f}) err {row.get('err', row.get('error'))}",
                  flush=True)
json.dump(dict(device=torch.cuda.get_device_name(0), rows=rows),
          open(os.path.join(os.environ.get("OUT", "."), "split_k.json"), "w"), indent=1)
