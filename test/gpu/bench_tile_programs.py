"""Tile programs beyond attention: GEMM, row softmax and layer norm beside PyTorch (issue 18).

    PYTHONPATH=build/python python3 test/gpu/bench_tile_programs.py [--json OUT.json]
        [--only gemm softmax layer_norm] [--dtype fp16|bf16] [--verbose]

Rows, each in one process on fresh random inputs:

- GEMM C = A·B (A, B and C of --dtype, f32 accumulation) at M×N×K = 4096³, 8192×8192×1024
  and 16×8192×8192, in TFLOP/s (2·M·N·K over the time): `gemm.matmul` of examples/python
  (autotuned over gemm.CONFIGS, the (BM, BN, BK, num_stages) of the issue) beside
  torch.matmul (cuBLAS) — for M <= 64 and K >= 4096 that is gemm.matmul_split_k (split 4), so
  the config printed for the skinny row is not the kernel that ran; `gemm_strided`: the same product through `gemm.matmul_strided`
  (sizes and strides as run-time arguments, 128×128×64 blocks, 3 stages).
- Row softmax of [R, C] at 32768×1024 and 4096×8192, in GB/s of x read and y written
  (2·R·C elements over the time): `softmax.softmax` (autotuned over BLOCK_R and num_warps)
  beside torch.softmax(x, dim=-1).
- Layer norm at the same shapes, in GB/s of x read and y written (weight, bias, mean and rstd
  add under 0.1 %, left out for both): `layer_norm.layer_norm` (autotuned likewise) beside
  torch.nn.functional.layer_norm.

Each timed call is the whole host function: output allocation and the Python launch path (the
autotuner's lookup included); the untimed first call tunes (--verbose, or
TESSEL_AUTOTUNE_VERBOSE=1, prints each config's time). Timing: bench_decode.make_timer, in the
order torch, tessel, tessel, torch, each keeping the better of its two (the GPU's clocks drift
over a row: cuBLAS measured 754 and 681 TFLOP/s minutes apart in one run).
`ratio` is torch's time over tessel's (above 1: tessel is faster); `diff` the largest
|tessel − torch| over the largest |torch|. The configs chosen are printed and in the JSON.
Without torch or CUDA it prints why and exits 0.
"""
import argparse
import os
import pathlib
import sys

from bench_decode import cuda_torch, make_timer, save_report

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"))

GEMM_SHAPES = [(4096, 4096, 4096), (8192, 8192, 1024), (16, 8192, 8192)]
ROW_SHAPES = [(32768, 1024), (4096, 8192)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--only", nargs="+", choices=["gemm", "softmax", "layer_norm"],
                    default=["gemm", "softmax", "layer_norm"])
    ap.add_argument("--dtype", choices=["fp16", "bf16"], default="fp16")
    ap.add_argument("--verbose", action="store_true", help="print the autotuner's timings")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch = cuda_torch("bench_tile_programs")
    if torch is None:
        return 0
    if args.verbose:
        os.environ["TESSEL_AUTOTUNE_VERBOSE"] = "1"
    import gemm
    import layer_norm
    import softmax

    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    timed, timer = make_timer(torch)
    gen = torch.Generator(device="cuda").manual_seed(args.seed)
    report = dict(device=torch.cuda.get_device_name(0), torch=torch.__version__, timer=timer,
                  dtype=args.dtype, rows=[])
    print(f"{report['device']}, {args.dtype}; {timer}; ratio = torch time / tessel time")
    print(f"{'program':<11} {'shape':>16} {'tessel':>9} {'torch':>9} {'unit':>7} {'ratio':>6} "
          f"{'diff':>8}  config")

    def rand(*shape):
        return torch.randn(shape, generator=gen, device="cuda", dtype=torch.float32).to(dt)

    def measure(program, shape, ours, theirs, work, unit, tuner):
        rate = {"TFLOP/s": "tflops", "GB/s": "gbps"}[unit]       # the JSON's name of the unit
        row = dict(program=program, shape=list(shape), unit=unit)
        want = theirs()
        try:
            got = ours()                                   # tunes on first use, untimed
            # torch, tessel, tessel, torch: a drift of the clocks over the row (the tuning
            # before it heats the GPU) weighs on both alike; each keeps its better time.
            each = {"torch": [timed(theirs)], "tessel": [timed(ours), timed(ours)]}
            each["torch"].append(timed(theirs))
            row["torch_ms_each"], row["tessel_ms_each"] = each["torch"], each["tessel"]
            row["torch_ms"], row["tessel_ms"] = min(each["torch"]), min(each["tessel"])
            row["diff"] = ((got.float() - want.float()).abs().max()
                           / want.float().abs().max()).item()
            row["config"] = tuner if isinstance(tuner, str) else repr(tuner.best_config)
        except Exception as e:                             # noqa: BLE001 (report, go on)
            row["tessel_why"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            row["torch_ms"] = timed(theirs)
        for who in ("tessel", "torch"):
            ms = row.get(f"{who}_ms")
            row[f"{who}_{rate}"] = work / ms / (1e9 if rate == "tflops" else 1e6) if ms else None
        row["ratio"] = row["torch_ms"] / row["tessel_ms"] if row.get("tessel_ms") else None
        report["rows"].append(row)

        def cell(who):
            v = row.get(f"{who}_{rate}")
            return f"{v:.1f}" if v else "-"
        ratio = f"{row['ratio']:.2f}" if row["ratio"] else "-"
        diff = f"{row['diff']:.1e}" if "diff" in row else "-"
        print(f"{program:<11} {'x'.join(map(str, shape)):>16} {cell('tessel'):>9} "
              f"{cell('torch'):>9} {unit:>7} {ratio:>6} {diff:>8}  "
              f"{row.get('config', row.get('tessel_why', ''))}", flush=True)

    if "gemm" in args.only:
        for M, N, K in GEMM_SHAPES:
            a, b = rand(M, K), rand(K, N)
            measure("gemm", (M, N, K), lambda: gemm.matmul(a, b), lambda: torch.matmul(a, b),
                    2.0 * M * N * K, "TFLOP/s", gemm.matmul_tuned)
            # The same product through the kernel with run-time sizes and strides.
            measure("gemm_strided", (M, N, K), lambda: gemm.matmul_strided(a, b),
                    lambda: torch.matmul(a, b), 2.0 * M * N * K, "TFLOP/s",
                    "128x128x64, 3 stages")
            del a, b
    F = torch.nn.functional
    for R, C in ROW_SHAPES:
        x = rand(R, C)
        moved = 2.0 * R * C * x.element_size()
        if "softmax" in args.only:
            measure("softmax", (R, C), lambda: softmax.softmax(x),
                    lambda: torch.softmax(x, dim=-1), moved, "GB/s", softmax.softmax_tuned)
        if "layer_norm" in args.only:
            w = torch.randn(C, generator=gen, device="cuda", dtype=torch.float32).to(dt)
            b = torch.randn(C, generator=gen, device="cuda", dtype=torch.float32).to(dt)
            measure("layer_norm", (R, C), lambda: layer_norm.layer_norm(x, w, b)[0],
                    lambda: F.layer_norm(x, (C,), w, b, eps=1e-5), moved, "GB/s",
                    layer_norm.layer_norm_tuned)
    save_report(args.json, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
