"""A/B of GpuOptions fields on the H200, interleaved by process: tessel alone (do_bench median)
on dense d128 fp16 (b·n = 16k tokens, h·d = 2048; 1k, 4k, 16k keys, causal and not; the case
`d64` and `d256`, asked for, the same at d64 and d256; `ragged` and `ragged256`, d128 and d256
non-causal at 1000, 4000, 16000 keys) and
on bench_block_mask's document, window and ALiBi masks (B4 H16 N8k), once with the fields
given (`A`) and once with tessel's defaults or `--base`'s fields (`B`), in alternating processes — a GpuOptions override must hold before the first
launcher is made, and the H200's clocks drift between processes, so one process a
configuration, A B A B …, then the medians and A / B per case.

The sessions' one-off A/B scripts (bench/results/*/ab*.py) as one tool:

    cd test/gpu && PYTHONPATH=<bundle>/python python3 ab_gpu_options.py OUT_DIR \\
        --set tma_producer=False [--set producer_once=True] [--grid NAME=VALUE] \\
        [--base FIELD=VALUE] [--rounds 2] [--cases dense masks d64 ragged]

Writes OUT_DIR/ab-{A,B}-{round}.json and OUT_DIR/summary.json; prints one line a case.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from set_fields import parse_set  # noqa: E402

CASES = ("dense", "masks", "d64", "ragged", "d256", "ragged256")


def run_child(mode, options, policy, cases, out):
    """Times the cases in this process with GpuOptions fields `options` and tessel.grid
    settings `policy` (mode A: --set and --grid, mode B: --base; tessel's defaults where
    empty)."""
    import torch
    from bench_block_mask import allowed_pairs, make_cases
    from bench_decode import compile_with, make_timer
    if options:
        compile_with(**options)
    import importlib
    for name, setting in policy.items():
        module, _, attr = name.rpartition(".")
        target = importlib.import_module(f"tessel.{module or 'grid'}")
        if not hasattr(target, attr):
            raise SystemExit(f"--grid: tessel.{module or 'grid'} has no {attr}")
        setattr(target, attr, setting)
    import tessel
    from tessel import language as tl
    timed, timer = make_timer(torch)
    dt = torch.float16
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows = {}
    # (head dim, lengths, causal cases); `ragged`: d128 at lengths no key block divides.
    sweeps = [(D, (1024, 4096, 16384), (False, True))
              for D, case in ((128, "dense"), (64, "d64"), (256, "d256")) if case in cases]
    for D, case in ((128, "ragged"), (256, "ragged256")):
        if case in cases:
            sweeps.append((D, (1000, 4000, 16000), (False,)))
    for D, lengths, causals in sweeps:
        for n in lengths:
            B, H = 16384 // n, 2048 // D
            q, k, v = (torch.randn(B, H, n, D, device="cuda", dtype=dt, generator=gen)
                       for _ in range(3))
            for causal in causals:
                flops = 4 * B * H * n * n * D / (2 if causal else 1)

                def call(q=q, k=k, v=v, causal=causal):
                    return tessel.attention(q, k, v, causal=causal)
                call()
                rows[f"d{D} {n} {'causal' if causal else 'full'}"] = flops / timed(call) / 1e9
            del q, k, v
    if "masks" in cases:
        B, H, N, D = 4, 16, 8192, 128
        masks = make_cases(torch, tl, B, H, N, gen)
        q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=dt, generator=gen)
                   for _ in range(3))
        for name in ("document", "window", "alibi"):
            mask_mod, score_t, _, per_batch = masks[name]
            flops = 4.0 * D * allowed_pairs(torch, mask_mod, B, N, per_batch) * H
            bm = tessel.block_mask(mask_mod, B if per_batch else None, None, N, N,
                                   device="cuda")

            def call(mask_mod=mask_mod, score_t=score_t, bm=bm):
                return tessel.attention(q, k, v, score_mod=score_t, mask_mod=mask_mod,
                                        block_mask=bm)
            call()
            rows[f"{name} (block mask)"] = flops / timed(call) / 1e9
    json.dump(dict(timer=timer, device=torch.cuda.get_device_name(0), mode=mode,
                   options=options, grid=policy, rows=rows), open(out, "w"), indent=1)
    print(json.dumps(dict(mode=mode, rows={k: round(v, 1) for k, v in rows.items()})),
          flush=True)


def summarize(folder):
    """{case: (median A, median B, A / B, runs A, runs B)} from the folder's JSON files."""
    runs = {m: [json.load(open(f))["rows"]
                for f in sorted(glob.glob(os.path.join(folder, f"ab-{m}-*.json")))]
            for m in ("A", "B")}
    out = {}
    for case in (runs["B"][0] if runs["B"] else {}):
        a = [r[case] for r in runs["A"] if case in r]
        b = [r[case] for r in runs["B"] if case in r]
        if a and b:
            ma, mb = statistics.median(a), statistics.median(b)
            out[case] = (ma, mb, ma / mb, a, b)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="folder for the processes' JSON files and the summary")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="a GpuOptions field of configuration A (repeatable)")
    ap.add_argument("--grid", action="append", default=[], metavar="NAME=VALUE",
                    help="a tessel.grid setting of configuration A (repeatable), e.g. "
                         "PIPELINE_TILES_GPU=True: tessel's policy rather than a field for "
                         "every kernel; MODULE.NAME for another module's, e.g. "
                         "attention.EVEN_KEYS=False")
    ap.add_argument("--base", action="append", default=[], metavar="FIELD=VALUE",
                    help="a GpuOptions field of configuration B (repeatable; default: none, "
                         "tessel's defaults)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cases", nargs="*", choices=CASES, default=["dense", "masks"])
    ap.add_argument("--timeout", type=int, default=150, help="seconds a process may take")
    ap.add_argument("--child", choices=["A", "B"], help=argparse.SUPPRESS)
    ap.add_argument("--json", help=argparse.SUPPRESS)
    args = ap.parse_args()

    def fields(items):
        try:
            return parse_set(items)
        except ValueError as e:
            ap.error(f"--set, --grid and --base: {e}")
    options, base, policy = fields(args.set), fields(args.base), fields(args.grid)
    if args.child:
        run_child(args.child, options if args.child == "A" else base,
                  policy if args.child == "A" else {}, args.cases, args.json)
        return 0
    os.makedirs(args.out, exist_ok=True)
    for r in range(1, args.rounds + 1):
        for mode in ("A", "B"):
            cmd = [sys.executable, os.path.abspath(__file__), args.out, "--child", mode,
                   "--json", os.path.join(args.out, f"ab-{mode}-{r}.json"), "--cases",
                   *args.cases, *[f"--set={s}" for s in args.set],
                   *[f"--base={s}" for s in args.base], *[f"--grid={s}" for s in args.grid]]
            try:
                subprocess.run(cmd, check=True, timeout=args.timeout)
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
                print(f"ab {mode} round {r} failed: {e}", flush=True)
    summary = summarize(args.out)
    shown = {**options, **{f"grid.{k}": v for k, v in policy.items()}}
    print(f"A = {shown or 'defaults'}, B = {base or 'defaults'}; TFLOP/s medians over "
          f"{args.rounds} process(es) each")
    for case, (ma, mb, ratio, a, b) in summary.items():
        print(f"{case:>22}  A {ma:7.1f}  B {mb:7.1f}  A/B {ratio:5.3f}  "
              f"({min(a):.0f}-{max(a):.0f} / {min(b):.0f}-{max(b):.0f})")
    json.dump(dict(options=options, grid=policy, base=base, rounds=args.rounds,
                   cases={c: dict(a=ma, b=mb, ratio=x, a_runs=a, b_runs=b)
                          for c, (ma, mb, x, a, b) in summary.items()}),
              open(os.path.join(args.out, "summary.json"), "w"), indent=1)
    return 0 if summary else 1


if __name__ == "__main__":
    sys.exit(main())
