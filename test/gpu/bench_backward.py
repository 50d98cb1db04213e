"""Backward speed: tessel.attention_backward beside FA2 and cuDNN (torch SDPA), one process (issue 11).

    PYTHONPATH=build/python python3 test/gpu/bench_backward.py [--json OUT.json]
        [--dims 64 128] [--lengths 4096 16384] [--dtype fp16] [--sweep 64x64 128x64 ...]
        [--async-dots] [--no-occupancy-hints] [--no-sink-waits] [--no-split-keyrows]
        [--concurrent-dq] [--dq-blocks 64x64] [--keyrows-blocks 64x128] [--with-deterministic] [--fused-dq 64 128]
        [--dk-block-m 32] [--padded-192] [--ab-block-head-dim]

The anchors' shapes (../shared/bench/anchors.md): b·n = 16384 tokens, h·d = 2048. TFLOP/s count
the backward as 2.5 × the forward's 4·b·h·n²·d (half for causal), FlashAttention's convention.
Each timed call is what a training step pays for the backward of one attention:

- tessel: `tessel.attention_backward(q, k, v, o, lse, do, causal=...)` — what tessel.attention's
  autograd backward calls: Δ, the dQ and dK/dV programs, the gradients' allocation, the Python
  launch path;
- FA2 / cuDNN: `torch.autograd.grad(o, (q, k, v), do, retain_graph=True)` with the SDPA backend
  forced (autograd's own overhead included).

Head dim 192: the tessel row is the native backward on sm_90a (backward.
NATIVE_BACKWARD_HEAD_DIMS); with --padded-192 it is the padded route (q, k, v, o and dO padded to
256, the gradients cut back: pads and cuts timed). Head dims the forward pads (96, 80, ...):
attention_backward's default (the programs' DB where backward.BLOCK_HEAD_DIM_CHIPS lists the
chip, else padded copies); --ab-block-head-dim times the other route beside it in the same row
(`DB` or `copies`, and the default's time over its).

Also per row: the largest |tessel − FA2| of dq, dk and dv relative to FA2's largest value (a
sanity check: the float64 checks are test/gpu/test_attention_backward_gpu.py), and at the longest
length the peak memory of one tessel forward + backward above its inputs (no N×N buffer: O(N)).
Timing: bench_decode.make_timer (triton.testing.do_bench's median when triton imports). Without
torch or CUDA it prints why and exits 0.
"""
import argparse
import sys

from bench_decode import compile_with, cuda_torch, make_timer, max_rel_diff, save_report, sdpa_cells


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--dims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--lengths", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--dtype", choices=["fp16", "bf16"], default="fp16")
    ap.add_argument("--sweep", type=lambda t: tuple(int(x) for x in t.split("x")), nargs="*",
                    default=[], help="block pairs BMxBN to time at the longest length")
    ap.add_argument("--async-dots", action="store_true",
                    help="compile with GpuOptions(wgmma_async_dots=True) (tilegpu-async-dots)")
    ap.add_argument("--no-split-keyrows", action="store_true",
                    help="dV and dK by one program at d256 too (backward.SPLIT_KEYROWS = (); "
                         "to compare)")
    ap.add_argument("--split-keyrows", type=int, nargs="*",
                    help="head dims whose dV and dK come from two programs "
                         "(backward.SPLIT_KEYROWS; default 192 256)")
    ap.add_argument("--keyrows-blocks", type=lambda t: tuple(int(x) for x in t.split("x")),
                    help="the key-rows dK/dV program's blocks at every --dims on sm_90a (query "
                         "x key rows; backward.FAST_KEYROWS_BLOCKS_SM90): 64x128 is two "
                         "warpgroups")
    ap.add_argument("--dq-blocks", type=lambda t: tuple(int(x) for x in t.split("x")),
                    help="the dQ program's blocks at every --dims on sm_90a, e.g. 64x64 "
                         "(backward.FAST_DQ_BLOCKS_SM90; default 128x128 at d128)")
    ap.add_argument("--concurrent-dq", action="store_true",
                    help="the dQ program on a second stream (backward.CONCURRENT_DQ = True)")
    ap.add_argument("--fused-dq", type=int, nargs="*",
                    help="head dims whose dQ comes from the key-rows program "
                         "(backward.FUSED_DQ_DIMS)")
    ap.add_argument("--with-deterministic", action="store_true",
                    help="also time deterministic=True (dQ by its own program, never by "
                         "atomics: backward.FUSED_DQ_DIMS off) in the same row")
    ap.add_argument("--no-occupancy-hints", action="store_true",
                    help="compile with GpuOptions(occupancy_hints=False): ptxas' first "
                         "register allocation (to compare)")
    ap.add_argument("--no-sink-waits", action="store_true",
                    help="compile with GpuOptions(sink_waits=False): the blocks loaded before "
                         "a loop waited for before its first copies (to compare)")
    ap.add_argument("--dk-block-m", type=int,
                    help="query rows of the split's dK program at the --dims in SPLIT_KEYROWS "
                         "(backward.KEYROWS_DK_BLOCK_M; default: the dV program's)")
    ap.add_argument("--padded-192", action="store_true",
                    help="d192 padded to 256 (backward.NATIVE_BACKWARD_HEAD_DIMS emptied), not "
                         "as it is")
    ap.add_argument("--ab-block-head-dim", action="store_true",
                    help="at head dims the forward pads, also time the route the default does "
                         "not take — padded copies, or blocks of the padded head dim over the "
                         "tensors as they are (backward.BLOCK_HEAD_DIM_CHIPS) — in the same row")
    ap.add_argument("--even-causal", action="store_true",
                    help="backward.EVEN_CAUSAL: causal calls at whole blocks run the key-rows "
                         "program without its bounds mask (off by default until measured)")
    args = ap.parse_args()
    torch = cuda_torch("bench_backward")
    if torch is None:
        return 0
    fields = dict(wgmma_async_dots=True) if args.async_dots else {}
    if args.no_occupancy_hints:
        fields["occupancy_hints"] = False
    if args.no_sink_waits:
        fields["sink_waits"] = False
    if fields:
        compile_with(**fields)
    import tessel
    from torch.nn.attention import SDPBackend, sdpa_kernel
    if args.no_split_keyrows:
        import tessel.backward
        tessel.backward.SPLIT_KEYROWS = ()
    if args.split_keyrows is not None:
        import tessel.backward
        tessel.backward.SPLIT_KEYROWS = tuple(args.split_keyrows)
    if args.fused_dq is not None:
        import tessel.backward
        tessel.backward.FUSED_DQ_DIMS = tuple(args.fused_dq)
    if args.concurrent_dq:
        import tessel.backward
        tessel.backward.CONCURRENT_DQ = True
    if args.even_causal:
        import tessel.backward
        tessel.backward.EVEN_CAUSAL = True
    if args.padded_192:
        import tessel.backward
        tessel.backward.NATIVE_BACKWARD_HEAD_DIMS = {"sm_90a": ()}
    if args.dk_block_m:
        import tessel.backward
        tessel.backward.KEYROWS_DK_BLOCK_M = {d: args.dk_block_m for d in args.dims}
    if args.keyrows_blocks:
        import tessel.backward
        tessel.backward.FAST_KEYROWS_BLOCKS_SM90 = {d: args.keyrows_blocks for d in args.dims}
    if args.dq_blocks:
        import tessel.backward
        tessel.backward.FAST_DQ_BLOCKS_SM90 = {d: args.dq_blocks for d in args.dims}

    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    timed, timer = make_timer(torch)
    report = dict(device=torch.cuda.get_device_name(0), torch=torch.__version__, timer=timer,
                  dtype=args.dtype, async_dots=args.async_dots,
                  concurrent_dq=args.concurrent_dq, dq_blocks=args.dq_blocks,
                  keyrows_blocks=args.keyrows_blocks, split_keyrows=args.split_keyrows,
                  even_causal=args.even_causal, native_192=not args.padded_192,
                  rows=[])
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    F = torch.nn.functional.scaled_dot_product_attention
    print(f"{'d':>4} {'n':>6} {'causal':>6} {'tessel':>8} {'FA2':>8} {'cuDNN':>8} "
          f"{'/FA2':>6} {'/cuDNN':>7} {'err':>8}")
    for D in args.dims:
        H = 2048 // D
        for n in args.lengths:
            B = max(1, 16384 // n)
            for causal in (False, True):
                q, k, v, do = (torch.randn(B, H, n, D, device="cuda", dtype=dt, generator=gen)
                               for _ in range(4))
                flops = 2.5 * 4 * B * H * n * n * D / (2 if causal else 1)
                o, lse = tessel.attention(q, k, v, causal=causal, return_lse=True)

                def ours():
                    return tessel.attention_backward(q, k, v, o, lse, do, causal=causal)
                row = dict(d=D, n=n, b=B, h=H, causal=causal)
                mine = ours()
                row["tessel_ms"] = timed(ours)
                if args.ab_block_head_dim and D not in (64, 128, 256):
                    import tessel.backward as bw
                    default_chips = bw.BLOCK_HEAD_DIM_CHIPS
                    # The route the default does not take: copies where the chip is listed.
                    inside = tessel.gpu.chip_of(q.device.index) not in default_chips
                    label = "DB" if inside else "copies"

                    def other():
                        bw.BLOCK_HEAD_DIM_CHIPS = ("sm_80", "sm_90a") if inside else ()
                        try:
                            return ours()
                        finally:
                            bw.BLOCK_HEAD_DIM_CHIPS = default_chips
                    row["other_route"] = label
                    row["max_rel_diff_other"] = max(max_rel_diff(a, b)
                                                    for a, b in zip(mine, other()))
                    row["tessel_other_ms"] = timed(other)
                if args.with_deterministic:
                    def det():
                        return tessel.attention_backward(q, k, v, o, lse, do, causal=causal,
                                                         deterministic=True)
                    dgrads = det()
                    row["tessel_det_ms"] = timed(det)
                    row["max_rel_diff_vs_det"] = max(max_rel_diff(a, b)
                                                     for a, b in zip(mine, dgrads))
                    del dgrads
                grads = {}
                for name, be in (("fa2", SDPBackend.FLASH_ATTENTION),
                                 ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                    leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
                    try:
                        with sdpa_kernel([be]):
                            out = F(*leaves, is_causal=causal)

                        def theirs(out=out, leaves=leaves):
                            return torch.autograd.grad(out, leaves, do, retain_graph=True)
                        grads[name] = theirs()
                        row[f"{name}_ms"] = timed(theirs)
                    except Exception as e:           # noqa: BLE001 (the backend refuses)
                        row[f"{name}_ms"] = None
                        row[f"{name}_why"] = f"{type(e).__name__}: {str(e)[:100]}"
                    del leaves
                if "fa2" in grads:
                    row["max_rel_diff_vs_fa2"] = max(max_rel_diff(a, b)
                                                     for a, b in zip(mine, grads["fa2"]))
                line = sdpa_cells(row, flops, "max_rel_diff_vs_fa2")
                report["rows"].append(row)
                if "tessel_other_ms" in row:
                    line += (f"  {row['other_route']} {flops / row['tessel_other_ms'] / 1e9:.1f}"
                             f" ({row['tessel_ms'] / row['tessel_other_ms']:.2f}×, "
                             f"diff {row['max_rel_diff_other']:.1e})")
                if args.with_deterministic:
                    line += (f"  det {flops / row['tessel_det_ms'] / 1e9:.1f} "
                             f"({row['tessel_det_ms'] / row['tessel_ms']:.2f}×, "
                             f"diff {row['max_rel_diff_vs_det']:.1e})")
                print(f"{D:>4} {n:>6} {str(causal):>6} {line}", flush=True)
                del q, k, v, do, o, lse, mine, grads
    # The blocks: (BLOCK_M, BLOCK_N) of both programs at the longest length, beside the default.
    n = max(args.lengths)
    report["sweep"] = []
    for D in args.dims if args.sweep else []:
        H, B = 2048 // D, max(1, 16384 // n)
        for causal in (False, True):
            q, k, v, do = (torch.randn(B, H, n, D, device="cuda", dtype=dt, generator=gen)
                           for _ in range(4))
            o, lse = tessel.attention(q, k, v, causal=causal, return_lse=True)
            flops = 2.5 * 4 * B * H * n * n * D / (2 if causal else 1)
            cells = []
            for bm, bn in args.sweep:
                def run(bm=bm, bn=bn):
                    return tessel.attention_backward(q, k, v, o, lse, do, causal=causal,
                                                     block_m=bm, block_n=bn)
                try:
                    run()
                    ms = timed(run)
                    cells.append(f"{bm}x{bn} {flops / ms / 1e9:.1f}")
                    report["sweep"].append(dict(d=D, n=n, causal=causal, block_m=bm,
                                                block_n=bn, ms=ms, tflops=flops / ms / 1e9))
                except Exception as e:               # noqa: BLE001 (a block that fails)
                    cells.append(f"{bm}x{bn} failed")
                    report["sweep"].append(dict(d=D, n=n, causal=causal, block_m=bm,
                                                block_n=bn, error=f"{type(e).__name__}: "
                                                f"{str(e)[:200]}"))
            print(f"sweep d{D} n{n} causal={causal}: " + ", ".join(cells), flush=True)
            del q, k, v, do, o, lse
    # Peak memory of one forward + backward at the longest length, d128 (O(N): no N×N buffer).
    n = max(args.lengths)
    D = max(args.dims)
    B, H = max(1, 16384 // n), 2048 // D
    torch.cuda.empty_cache()
    q, k, v, do = (torch.randn(B, H, n, D, device="cuda", dtype=dt, requires_grad=i < 3)
                   for i in range(4))
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    tessel.attention(q, k, v, causal=True).backward(do)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    report["peak_fwd_bwd"] = dict(b=B, h=H, n=n, d=D, extra_bytes=peak,
                                  input_bytes=4 * q.numel() * q.element_size(),
                                  n_by_n_bytes=B * H * n * n * 2)
    print(f"peak memory of forward + backward, b{B} h{H} n{n} d{D}: {peak / 2**20:.0f} MiB above "
          f"the inputs (q, k, v, do: {4 * q.numel() * 2 / 2**20:.0f} MiB; one N×N fp16 score "
          f"matrix would be {B * H * n * n * 2 / 2**30:.1f} GiB)")
    save_report(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
