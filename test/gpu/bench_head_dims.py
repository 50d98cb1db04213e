"""Forward speed over head dims: tessel.attention beside cuDNN and FA2 (torch SDPA), one process
(issue 16: head dims 256, and 80/96/192 padded).

    PYTHONPATH=build/python python3 test/gpu/bench_head_dims.py [--json OUT.json]
        [--dims 64 96 128 192 256] [--lengths 4096 16384] [--dtype fp16] [--no-occupancy-hints]
        [--no-sink-waits] [--no-warp-specialize] [--no-overlap-consumers] [--no-tma-producer]
        [--no-vector-stores] [--ab-block-head-dim] [--rounds N]

The anchors' shapes (../shared/bench/anchors.md): b·n = 16384 tokens, h·d = 2048 (h rounded
down). Timed per call: `tessel.attention(q, k, v, causal=...)` (its output allocation and the
Python launch path; for padded head dims the padding copies too) and SDPA with one backend forced
(`torch.nn.attention.sdpa_kernel`). TFLOP/s count 4·b·h·n²·d (half for causal) at the caller's d.
Also per row: the largest |tessel − cuDNN| relative to cuDNN's largest value (a sanity check; the
float32 checks are test/gpu/test_python_gpu.py). Timing: bench_decode.make_timer. Without torch
or CUDA it prints why and exits 0.

`--rounds N`: tessel, FA2 and cuDNN timed in turn N times a row; the row reports each one's
median over the rounds (each round's times kept in the JSON as `rounds`), so a clock or
thermal drift during one timing moves one round, not the ratio (d256's ratio moved 0.86-1.07
between single runs on an H100).

`--ab-block-head-dim`: a cell for the head dims tessel pads (96, 80, ...) on the route the
default does not take — copied padded (`copies`) where attention.BLOCK_HEAD_DIM_CHIPS lists the
chip, else the kernels at the padded head dim over q, k and v as they are (`DB`) — and its
difference to cuDNN; `--ab-native` likewise for head dim 192 (`padded` or `native`).
"""
import argparse
import importlib
import statistics

from bench_decode import compile_with, cuda_torch, make_timer, max_rel_diff, save_report, \
    sdpa_cells, set_persistent, time_sdpa


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--dims", type=int, nargs="+", default=[64, 96, 128, 192, 256])
    ap.add_argument("--lengths", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--dtype", choices=["fp16", "bf16"], default="fp16")
    ap.add_argument("--rounds", type=int, default=1,
                    help="time tessel, FA2 and cuDNN in turn N times a row; report medians")
    ap.add_argument("--sweep", type=lambda t: tuple(int(x) for x in t.split("x")), nargs="*",
                    default=[], help="tessel blocks BMxBN timed too (block_m=, block_n=)")
    ap.add_argument("--overlap", action="store_true",
                    help="compile tessel's kernels with GpuOptions(wgmma_overlap=True)")
    ap.add_argument("--stages", type=int, choices=[2, 3, 4], default=2,
                    help="compile tessel's kernels with GpuOptions(num_stages=N)")
    ap.add_argument("--no-occupancy-hints", action="store_true",
                    help="compile tessel's kernels with GpuOptions(occupancy_hints=False)")
    ap.add_argument("--no-sink-waits", action="store_true",
                    help="compile tessel's kernels with GpuOptions(sink_waits=False): Q waited "
                         "for before the key loop's first copies (to compare)")
    ap.add_argument("--warp-specialize", action="store_true",
                    help="the default since 2026-12-03 (kept for the commands of earlier pages)")
    ap.add_argument("--no-warp-specialize", action="store_true",
                    help="compile tessel's kernels with GpuOptions(warp_specialize=False): K/V "
                         "copied by every thread, CTA barriers (to compare)")
    ap.add_argument("--no-overlap-consumers", action="store_true",
                    help="compile tessel's kernels with GpuOptions(overlap_consumers=False): "
                         "a warp-specialized kernel's dots waited for where they stand")
    ap.add_argument("--pingpong", action="store_true",
                    help="the default since 2026-12-03 (kept for the commands of earlier pages)")
    ap.add_argument("--no-pingpong", action="store_true",
                    help="compile tessel's kernels with GpuOptions(pingpong=False): overlapped "
                         "consumer warpgroups issue their dots without taking turns")
    ap.add_argument("--producer-once", action="store_true",
                    help="compile every tessel kernel with GpuOptions(producer_once=True): the "
                         "producer warpgroup copies Q too (tilegpu-producer-once; by default "
                         "only where tiles are short, grid.short_tiles)")
    ap.add_argument("--no-tma-producer", action="store_true",
                    help="compile tessel's kernels with GpuOptions(tma_producer=False): the "
                         "producer's copies by cp.async (to compare)")
    ap.add_argument("--no-vector-stores", action="store_true",
                    help="compile tessel's kernels with GpuOptions(vector_stores=False): the "
                         "output stored 4 bytes a thread (to compare)")
    ap.add_argument("--persistent", choices=["on", "off"],
                    help="persistent kernels on or off (default: tessel's, grid.PERSISTENT_GPU)")
    ap.add_argument("--ab-persistent", action="store_true",
                    help="also time tessel with persistent kernels the other way (a cell)")
    ap.add_argument("--ab-native", action="store_true",
                    help="also time head dim 192 on the route the default does not take: "
                         "padded where attention.NATIVE_HEAD_DIMS lists it for the chip (sm_90a), "
                         "else as it is (a cell)")
    ap.add_argument("--ab-block-head-dim", action="store_true",
                    help="also time head dims tessel pads on the route the default does not "
                         "take: copied padded, or blocks of the padded head dim over the "
                         "unpadded inputs (attention.BLOCK_HEAD_DIM_CHIPS; a cell)")
    args = ap.parse_args()
    torch = cuda_torch("bench_head_dims")
    if torch is None:
        return 0
    import tessel
    from torch.nn.attention import SDPBackend
    if (args.overlap or args.stages != 2 or args.no_occupancy_hints or args.no_sink_waits
            or args.no_warp_specialize or args.no_overlap_consumers or args.no_pingpong
            or args.producer_once or args.no_tma_producer or args.no_vector_stores):
        compile_with(wgmma_overlap=args.overlap, num_stages=args.stages,
                     occupancy_hints=not args.no_occupancy_hints,
                     sink_waits=not args.no_sink_waits,
                     warp_specialize=not args.no_warp_specialize, pingpong=not args.no_pingpong,
                     overlap_consumers=not args.no_overlap_consumers,
                     **({"producer_once": True} if args.producer_once else {}),
                     tma_producer=not args.no_tma_producer,
                     vector_stores=not args.no_vector_stores)

    from tessel import grid
    if args.persistent:
        set_persistent(args.persistent == "on")
    persistent = grid.PERSISTENT_GPU
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    timed, timer = make_timer(torch)
    report = dict(device=torch.cuda.get_device_name(0), torch=torch.__version__, timer=timer,
                  dtype=args.dtype, rounds=args.rounds, overlap=args.overlap, stages=args.stages,
                  occupancy_hints=not args.no_occupancy_hints,
                  sink_waits=not args.no_sink_waits, warp_specialize=not args.no_warp_specialize,
                  overlap_consumers=not args.no_overlap_consumers, persistent=persistent,
                  rows=[])
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    print(f"{args.dtype}; TFLOP/s; {timer}{'; overlap' if args.overlap else ''}"
          f"{'; not warp-specialized' if args.no_warp_specialize else ''}"
          f"{'; consumers not overlapped' if args.no_overlap_consumers else ''}"
          f"{'; no ping-pong' if args.no_pingpong else ''}"
          f"{'; Q from the producer' if args.producer_once else ''}"
          f"{f'; {args.stages} stages' if args.stages != 2 else ''}"
          f"; persistent {'on' if persistent else 'off'}")
    print(f"{'d':>4} {'n':>6} {'causal':>6} {'tessel':>8} {'FA2':>8} {'cuDNN':>8} "
          f"{'/FA2':>6} {'/cuDNN':>7} {'diff':>8}")
    for D in args.dims:
        H = max(1, 2048 // D)
        for n in args.lengths:
            B = max(1, 16384 // n)
            for causal in (False, True):
                q, k, v = (torch.randn(B, H, n, D, device="cuda", dtype=dt, generator=gen)
                           for _ in range(3))
                flops = 4 * B * H * n * n * D / (2 if causal else 1)
                row = dict(d=D, n=n, b=B, h=H, causal=causal)

                def ours():
                    return tessel.attention(q, k, v, causal=causal)
                mine = ours()
                rounds = []
                for _ in range(max(1, args.rounds)):
                    row["tessel_ms"] = timed(ours)
                    theirs = time_sdpa(torch, row, timed, q, k, v, causal,
                                       (("fa2", SDPBackend.FLASH_ATTENTION),
                                        ("cudnn", SDPBackend.CUDNN_ATTENTION)))
                    rounds.append({x: row.get(f"{x}_ms") for x in ("tessel", "fa2", "cudnn")})
                if args.rounds > 1:
                    row["rounds"] = rounds
                    for x in ("tessel", "fa2", "cudnn"):
                        times = [r[x] for r in rounds if r[x] is not None]
                        row[f"{x}_ms"] = statistics.median(times) if times else None
                if "cudnn" in theirs:
                    row["max_rel_diff_vs_cudnn"] = max_rel_diff(mine, theirs["cudnn"])
                cells = []
                if args.ab_persistent:
                    set_persistent(not persistent)
                    ms = timed(ours)
                    set_persistent(persistent)
                    other = "persistent" if not persistent else "one a tile"
                    row["tessel_other_persistent_tflops"] = flops / ms / 1e9
                    cells.append(f"{other} {flops / ms / 1e9:.1f}")
                def switched_cell(name, value, label, key):
                    # tessel with tessel.attention's `name` set to `value` for the cell
                    listed = getattr(attn, name)
                    setattr(attn, name, value)
                    try:
                        mine = ours()
                        ms = timed(ours)
                    finally:
                        setattr(attn, name, listed)
                    row[f"tessel_{key}_tflops"] = flops / ms / 1e9
                    cells.append(f"{label} {flops / ms / 1e9:.1f}")
                    if "cudnn" in theirs:
                        row[f"{key}_max_rel_diff_vs_cudnn"] = max_rel_diff(mine, theirs["cudnn"])
                        cells.append(f"diff {row[f'{key}_max_rel_diff_vs_cudnn']:.1e}")
                # The cells time the route the defaults do not take.
                attn = importlib.import_module("tessel.attention")
                chip = tessel.gpu.chip_of(q.device.index)
                if args.ab_native and D == 192:
                    if 192 in attn.NATIVE_HEAD_DIMS.get(chip, ()):
                        switched_cell("NATIVE_HEAD_DIMS", {chip: ()}, "padded", "padded")
                    else:
                        switched_cell("NATIVE_HEAD_DIMS", {chip: (192,)}, "native", "native")
                if args.ab_block_head_dim and D not in (64, 128, 192, 256):
                    if chip in attn.BLOCK_HEAD_DIM_CHIPS:
                        switched_cell("BLOCK_HEAD_DIM_CHIPS", (), "copies", "copies")
                    else:
                        switched_cell("BLOCK_HEAD_DIM_CHIPS", (chip,), "DB", "block_head_dim")
                for bm, bn in args.sweep:
                    try:
                        ms = timed(lambda: tessel.attention(q, k, v, causal=causal, block_m=bm,
                                                            block_n=bn))
                        row[f"tessel_{bm}x{bn}_tflops"] = flops / ms / 1e9
                        cells.append(f"{bm}x{bn} {flops / ms / 1e9:.1f}")
                    except Exception as e:           # noqa: BLE001 (a block that fails)
                        row[f"tessel_{bm}x{bn}_why"] = f"{type(e).__name__}: {str(e)[:200]}"
                        cells.append(f"{bm}x{bn} failed")
                line = sdpa_cells(row, flops, "max_rel_diff_vs_cudnn")
                report["rows"].append(row)
                print(f"{D:>4} {n:>6} {str(causal):>6} {line}"
                      + (f"  [{', '.join(cells)}]" if cells else ""), flush=True)
                del q, k, v, mine
    save_report(args.json, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
