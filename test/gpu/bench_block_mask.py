"""Masks and biases beside FlexAttention, one process (issue 13).

    PYTHONPATH=build/python python3 test/gpu/bench_block_mask.py [--json OUT.json]
        [--b 4] [--h 16] [--n 8192] [--d 128] [--dtype fp16] [--cases document window ...]

Each case is one mask_mod (and score_mod) written once and given to both: tessel with
`tessel.block_mask(...)` and FlexAttention (`torch.compile(flex_attention)`) with
`create_block_mask(...)`, both at 128x128 mask blocks, built once before timing. Timed per call:
`tessel.attention(q, k, v, score_mod=..., mask_mod=..., block_mask=bm)` and the compiled
`flex_attention(q, k, v, score_mod=..., block_mask=fbm)` (each allocates its output), and the
drop-in `tessel.flex_attention` with FlexAttention's own block mask and mods (`drop-in`). TFLOP/s
count only the allowed (query, key) pairs, 4·d flops each. "no bm": the same call without a
block_mask (tessel builds and caches one itself for masks that read tensors; other masks run the
dense kernel with the compile-time mask analysis). Also per case: the time to build the
block mask (tessel.block_mask vs create_block_mask), and the largest |tessel − flex| relative to
flex's largest value (a sanity check; the float32 checks are test/gpu/test_block_mask_gpu.py).
Timing: bench_decode.make_timer. Without torch, CUDA or flex_attention it prints why and exits 0.
"""
import argparse
import math

from bench_decode import compile_with, cuda_torch, make_timer, save_report, set_persistent
from mask_cases import document_ids

CASES = ["document", "window", "alibi", "softcap", "prefix_lm", "rel_bias", "block_sparse"]


def make_cases(torch, tl, B, H, N, gen):
    """name -> (mask_mod, tessel score_mod, flex score_mod, per-batch mask?)."""
    dev = "cuda"
    # Four documents per sequence with random cuts, ids in a [B, N] tensor.
    doc = document_ids(torch, B, N, gen)
    prefix = torch.randint(N // 8, N // 2, (B,), device=dev, generator=gen).to(torch.int32)
    slopes = torch.tensor([2.0 ** (-8.0 * (i + 1) / H) for i in range(H)], device=dev)
    rel = (torch.randn(H, 2 * N - 1, device=dev, generator=gen) * 0.5).float()
    G = 128
    blocks = torch.rand(-(-N // G), -(-N // G), device=dev, generator=gen) < 0.3

    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    def document(b, h, q_idx, kv_idx):
        return (doc[b, q_idx] == doc[b, kv_idx]) & (q_idx >= kv_idx)

    def window(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (q_idx - kv_idx < 1024)

    def prefix_lm(b, h, q_idx, kv_idx):
        return (kv_idx < prefix[b]) | (q_idx >= kv_idx)

    def block_sparse(b, h, q_idx, kv_idx):
        return blocks[q_idx // G, kv_idx // G]

    def alibi(score, b, h, q_idx, kv_idx):
        return score + slopes[h] * (kv_idx - q_idx)

    def rel_bias(score, b, h, q_idx, kv_idx):
        return score + rel[h, q_idx - kv_idx + N - 1]

    def softcap_tessel(score, b, h, q_idx, kv_idx):
        return 30.0 * tl.tanh(score / 30.0)

    def softcap_flex(score, b, h, q_idx, kv_idx):
        return 30.0 * torch.tanh(score / 30.0)

    return {
        "document": (document, None, None, True),
        "window": (window, None, None, False),
        "alibi": (causal, alibi, alibi, False),
        "softcap": (causal, softcap_tessel, softcap_flex, False),
        "prefix_lm": (prefix_lm, None, None, True),
        "rel_bias": (causal, rel_bias, rel_bias, False),
        "block_sparse": (block_sparse, None, None, False),
    }


def allowed_pairs(torch, mask_mod, B, N, per_batch):
    """The number of allowed (query, key) pairs over the batch (heads alike), counted densely in
    row chunks."""
    total = 0
    kv = torch.arange(N, device="cuda")[None, :]
    for b in range(B if per_batch else 1):
        for r0 in range(0, N, 1024):
            q = torch.arange(r0, min(N, r0 + 1024), device="cuda")[:, None]
            total += int(mask_mod(b, 0, q, kv).sum().item())
    return total * (1 if per_batch else B)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--b", type=int, default=4)
    ap.add_argument("--h", type=int, default=16)
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--dtype", choices=["fp16", "bf16"], default="fp16")
    ap.add_argument("--cases", nargs="+", choices=CASES, default=CASES)
    ap.add_argument("--blocks", type=lambda t: tuple(int(x) for x in t.split("x")),
                    help="tessel's kernel blocks BMxBN (they divide the 128x128 mask blocks)")
    ap.add_argument("--overlap", action="store_true",
                    help="compile tessel's kernels with GpuOptions(wgmma_overlap=True)")
    ap.add_argument("--producer-once", action="store_true",
                    help="compile every tessel kernel with GpuOptions(producer_once=True) (by "
                         "default only where tiles are short, grid.short_tiles)")
    ap.add_argument("--no-tma-producer", action="store_true",
                    help="compile tessel's kernels with GpuOptions(tma_producer=False): the "
                         "producer's copies by cp.async (to compare)")
    ap.add_argument("--persistent", choices=["on", "off"],
                    help="persistent kernels on or off (default: tessel's, grid.PERSISTENT_GPU)")
    ap.add_argument("--ab-persistent", action="store_true",
                    help="also time tessel (block mask) with persistent kernels the other way")
    args = ap.parse_args()
    torch = cuda_torch("bench_block_mask")
    if torch is None:
        return 0
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    except ImportError as e:
        print(f"bench_block_mask: skipped: no flex_attention ({e})")
        return 0
    import tessel
    from tessel import language as tl
    if args.overlap or args.producer_once or args.no_tma_producer:
        compile_with(**({"wgmma_overlap": True} if args.overlap else {}),
                     **({"producer_once": True} if args.producer_once else {}),
                     **({"tma_producer": False} if args.no_tma_producer else {}))
    block_m, block_n = args.blocks or (None, None)
    from tessel import grid
    if args.persistent:
        set_persistent(args.persistent == "on")
    persistent = grid.PERSISTENT_GPU

    B, H, N, D = args.b, args.h, args.n, args.d
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    timed, timer = make_timer(torch)
    flex = torch.compile(flex_attention, dynamic=False)
    report = dict(device=torch.cuda.get_device_name(0), torch=torch.__version__, timer=timer,
                  dtype=args.dtype, b=B, h=H, n=N, d=D, persistent=persistent, rows=[])
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    cases = make_cases(torch, tl, B, H, N, gen)
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=dt, generator=gen) for _ in range(3))
    print(f"B{B} H{H} N{N} D{D} {args.dtype}; TFLOP/s on allowed pairs; {timer}; tessel "
          f"blocks {args.blocks or 'default'}{', overlap' if args.overlap else ''}; persistent "
          f"{'on' if persistent else 'off'}")
    print(f"{'case':>13} {'density':>7} {'tessel':>8} {'no bm':>8} {'flex':>8} {'/flex':>6} "
          f"{'bm ms':>7} {'cbm ms':>7} {'diff':>8} {'drop-in':>8}")
    for name in args.cases:
        mask_mod, score_t, score_f, per_batch = cases[name]
        pairs = allowed_pairs(torch, mask_mod, B, N, per_batch)
        flops = 4.0 * D * pairs * H
        row = dict(case=name, density=pairs / (B * N * N))
        bB = B if per_batch else None
        bm = tessel.block_mask(mask_mod, bB, None, N, N, device="cuda")
        row["tessel_block_mask_ms"] = timed(
            lambda: tessel.block_mask(mask_mod, bB, None, N, N, device="cuda"))
        try:
            fbm = create_block_mask(mask_mod, bB, None, N, N, device="cuda")
            row["flex_block_mask_ms"] = timed(
                lambda: create_block_mask(mask_mod, bB, None, N, N, device="cuda"))
        except Exception as e:                       # noqa: BLE001 (flex refuses the mask)
            fbm = None
            row["flex_why"] = f"{type(e).__name__}: {str(e)[:200]}"

        def ours():
            return tessel.attention(q, k, v, score_mod=score_t, mask_mod=mask_mod,
                                    block_mask=bm, block_m=block_m, block_n=block_n)
        mine = ours()
        row["tessel_ms"] = timed(ours)
        if args.ab_persistent:
            set_persistent(not persistent)
            row["tessel_other_persistent_ms"] = timed(ours)
            set_persistent(persistent)

        def plain():   # no block_mask: automatic for masks that read tensors, else the dense kernel
            return tessel.attention(q, k, v, score_mod=score_t, mask_mod=mask_mod,
                                    block_m=block_m, block_n=block_n)
        plain()
        row["tessel_no_bm_ms"] = timed(plain)
        if fbm is not None:
            def drop_in():    # FlexAttention's call as it is: its block mask and its mods
                return tessel.flex_attention(q, k, v, score_mod=score_f, block_mask=fbm)
            try:
                drop_in()
                row["drop_in_ms"] = timed(drop_in)
            except Exception as e:                   # noqa: BLE001
                row["drop_in_why"] = f"{type(e).__name__}: {str(e)[:200]}"

            def theirs():
                return flex(q, k, v, score_mod=score_f, block_mask=fbm)
            try:
                want = theirs()
                row["flex_ms"] = timed(theirs)
                row["max_rel_diff_vs_flex"] = ((mine.float() - want.float()).abs().max()
                                               / want.float().abs().max()).item()
            except Exception as e:                   # noqa: BLE001
                row["flex_why"] = f"{type(e).__name__}: {str(e)[:200]}"
        for key in ("tessel", "tessel_no_bm", "flex", "tessel_other_persistent", "drop_in"):
            ms = row.get(f"{key}_ms")
            row[f"{key}_tflops"] = flops / ms / 1e9 if ms else None
        report["rows"].append(row)

        def num(x, fmt):
            return format(x, fmt) if x is not None and not (isinstance(x, float)
                                                            and math.isnan(x)) else "-"
        ratio = row["flex_ms"] / row["tessel_ms"] if row.get("flex_ms") else None
        print(f"{name:>13} {row['density']:>7.3f} {num(row['tessel_tflops'], '.1f'):>8} "
              f"{num(row['tessel_no_bm_tflops'], '.1f'):>8} "
              f"{num(row.get('flex_tflops'), '.1f'):>8} {num(ratio, '.2f'):>6} "
              f"{num(row['tessel_block_mask_ms'], '.3f'):>7} "
              f"{num(row.get('flex_block_mask_ms'), '.3f'):>7} "
              f"{num(row.get('max_rel_diff_vs_flex'), '.2e'):>8} "
              f"{num(row.get('drop_in_tflops'), '.1f'):>8}"
              + (f"  [{'one a tile' if persistent else 'persistent'} "
                 f"{num(row['tessel_other_persistent_tflops'], '.1f')}]"
                 if args.ab_persistent else ""), flush=True)
        for why in ("flex_why", "drop_in_why"):
            if row.get(why):
                print(f"{'':>13} {why[:-4]}: {row[why]}")
    save_report(args.json, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
