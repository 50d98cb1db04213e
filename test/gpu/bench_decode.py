"""Decode speed: tessel.attention_with_kvcache beside cuDNN, FA2 and a copy (issue 12).

    PYTHONPATH=build/python python3 test/gpu/bench_decode.py [--json OUT.json]
        [--nk 1024 8192 65536] [--batch 8] [--heads 32] [--kv-heads 8] [--dim 128]
        [--page 256] [--splits 1 2 4 8 16 32 64] [--stages 2|3|4] [--no-sink-waits]
        [--no-block-head-dim]

One query token per sequence (Sq = 1) against a cache of nk keys, fp16, all in one process, in
GB/s of K and V read (2 · B · nk · Hkv · D · 2 bytes over the time), for a contiguous cache
[B, nk, Hkv, D] and a paged one [num_pages, page, Hkv, D] (pages in random order, holding the
same keys). Rows:

- tessel: the default call (num_splits=None: the split-KV heuristic, GQA packing, the default
  blocks); `tessel 64x64`: block_m = block_n = 64 (the blocks the fast paths take; pages
  shorter than 64 rows are read row by row through a paged descriptor); `tessel
  1 split`: num_splits=1 (one program per query head, the kernel before split-KV). Each timed
  call is the whole entry point: checks, Python launch path, output and workspace allocation.
- cuDNN, FA2: torch SDPA with the cuDNN or the flash backend forced, on [B, H, 1, D] and a
  dense [B, Hkv, nk, D] cache (enable_gqa=True, or the cache expanded to H heads beforehand
  where the backend refuses it; then its GB/s still count the cache's bytes). Both have no paged
  cache: the paged rows repeat their dense numbers.
- copy: torch.clone of a buffer of the same bytes, reported as (read + written) / time, the
  bandwidth a memory-bound kernel can hope for.
- the sweep (64x64 blocks, contiguous and paged): tessel at each explicit num_splits of
  --splits, to tune the heuristic (serving_decode.num_splits_heuristic); paged with an explicit
  count looks each block's page up in the key loop.

`back_to_back_us` (JSON): µs per call of 200 calls in a row without a flush — the host's cost
per call where it exceeds the GPU's (at 1k keys the GPU work is ~20 µs, and the Python entry of
the split path, with its two launches and four allocations, can take longer on a slow host: the
do_bench time then measures the host).

Timing: triton.testing.do_bench's median (it flushes L2 between calls) when triton imports,
else CUDA events around each call after a 256 MB L2 flush, median of 50 after 10 warm-up
calls. Errors: max |o - FA2's o| per tessel row (fp16 outputs). Without torch or CUDA it prints
why and exits 0.

`--no-block-head-dim`: serving_checks.KVCACHE_BLOCK_HEAD_DIM off, so that a --dim the fast paths
do not take (96, 80, 192) takes the reference lowering's blocks, as before the forty-second
session (the `tessel` row; the `64x64` rows then fail), instead of their kernels at the next
head dim they take (the cache read D wide, not copied).
"""
import argparse
import json
import os
import statistics
import sys
import time

from set_fields import parse_set


def save_report(path, report):
    """Writes a benchmark's report as JSON to `path` (its --json argument) when one is given."""
    if path:
        with open(path, "w") as f:
            json.dump(report, f, indent=1)


def make_timer(torch):
    try:
        from triton.testing import do_bench
    except Exception:                                # noqa: BLE001 (any import failure)
        do_bench = None
    if do_bench is not None:
        def timed(fn):
            try:
                return float(do_bench(fn, warmup=25, rep=100, return_mode="median"))
            except TypeError:                        # older triton: quantiles only
                r = do_bench(fn, warmup=25, rep=100, quantiles=[0.5])
                return float(r[0] if isinstance(r, (list, tuple)) else r)
        return timed, "triton.testing.do_bench median"
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")

    def timed(fn, warmup=10, reps=50):
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        pairs = []
        for _ in range(reps):
            flush.zero_()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            pairs.append((start, end))
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in pairs)
    return timed, "torch.cuda.Event median of 50 (L2 flushed)"


def warm_up(torch, seconds=1.0):
    """A second of fp16 matrix products before the first timing: the first length timed in a
    process read low in four decode runs out of five (cuDNN 612-719 GB/s at 1k keys against
    1,520), the clocks still rising."""
    warm = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        warm @ warm
        torch.cuda.synchronize()


def cuda_torch(name):
    """torch when it imports and sees a CUDA device; else None, after printing why benchmark
    `name` skips (the benchmarks then exit 0)."""
    try:
        import torch
    except ImportError:
        print(f"{name}: skipped: torch is not installed")
        return None
    if not torch.cuda.is_available():
        print(f"{name}: skipped: no CUDA device")
        return None
    return torch


def sdpa_cells(row, flops, diff_key):
    """For a row timed as tessel, fa2 and cudnn (`<name>_ms`): adds each `<name>_tflops` and
    returns the printed cells — the three TFLOP/s, tessel / FA2, tessel / cuDNN (their time
    over tessel's) and row[diff_key] — as bench_head_dims.py and bench_backward.py print them."""
    for key in ("tessel", "fa2", "cudnn"):
        ms = row.get(f"{key}_ms")
        row[f"{key}_tflops"] = flops / ms / 1e9 if ms else None

    def ratio(x):
        return f"{row[x + '_ms'] / row['tessel_ms']:.2f}" if row.get(x + "_ms") else "-"

    def tf(x):
        return f"{row[x + '_tflops']:.1f}" if row.get(x + "_tflops") else "-"
    return (f"{tf('tessel'):>8} {tf('fa2'):>8} {tf('cudnn'):>8} {ratio('fa2'):>6} "
            f"{ratio('cudnn'):>7} {row.get(diff_key, float('nan')):>8.2e}")


def max_rel_diff(a, b):
    """The largest |a − b| relative to b's largest magnitude (a sanity check of one result
    against another, in the benchmarks' rows)."""
    return ((a.float() - b.float()).abs().max() / b.float().abs().max()).item()


def time_sdpa(torch, row, timed, q, k, v, causal, backends):
    """Times torch SDPA's forward on q, k, v with each backend forced, `backends` being pairs
    (name, SDPBackend): row[f"{name}_ms"], or None and row[f"{name}_why"] where the backend
    refuses the inputs. Returns each backend's output, by name."""
    from torch.nn.attention import sdpa_kernel
    F = torch.nn.functional.scaled_dot_product_attention
    outs = {}
    for name, backend in backends:
        try:
            with sdpa_kernel([backend]):
                outs[name] = F(q, k, v, is_causal=causal)
                row[f"{name}_ms"] = timed(lambda: F(q, k, v, is_causal=causal))
        except Exception as e:                       # noqa: BLE001 (the backend refuses)
            row[f"{name}_ms"] = None
            row[f"{name}_why"] = f"{type(e).__name__}: {str(e)[:100]}"
    return outs


def compile_with(**fields):
    """Every tessel launcher made from here on compiles with these GpuOptions fields (e.g.
    wgmma_overlap=True, FA3's intra-warpgroup overlap; num_stages=3): the benchmarks' --overlap
    and --stages."""
    import tessel.cache

    class Overriding(tessel.cache.GpuOptions):
        def __init__(self, **kw):
            super().__init__(**{**kw, **fields})
    tessel.cache.GpuOptions = Overriding


def options_from_environment():
    """TESSEL_TEST_GPU_OPTIONS="FIELD=VALUE[,FIELD=VALUE]" (e.g. fuse_masked_loops=True): the
    GpuOptions fields every kernel of this process compiles with (compile_with), so that a
    code-generation switch that is not yet the default meets the GPU suites' reference checks
    and the benchmarks before it becomes one. Applied when this module is imported (every
    benchmark and test/gpu/conftest.py import it); the fields, {} where unset."""
    spec = os.environ.get("TESSEL_TEST_GPU_OPTIONS", "")
    fields = parse_set(spec.split(",")) if spec else {}
    if fields:
        compile_with(**fields)
    return fields


def set_persistent(on):
    """Persistent kernels (tessel.grid.PERSISTENT_GPU) on or off for the calls that follow: the
    benchmarks' --persistent and their A/B cells."""
    import importlib
    from tessel import grid
    attention = importlib.import_module("tessel.attention")   # the module, not the function
    grid.PERSISTENT_GPU = on
    attention._cuda_configs.clear()


def time_back_to_back(torch, fn, reps, warmup=1, synchronize=True, before=None):
    """Milliseconds per call of `reps` calls of fn run back to back between one pair of CUDA
    events (the mean; no L2 flush), after `warmup` calls and (with `synchronize`) a
    torch.cuda.synchronize; `before`, if given, runs just before the timed calls (the ring
    worker's dist.barrier). The ring benchmarks' timer (bench_ring_emulated.py,
    ring_gpu_worker.py, test_ring_gpu.py): a whole ring forward per call, the same number of
    calls on every rank (make_timer's do_bench picks its own count)."""
    for _ in range(warmup):
        fn()
    if synchronize:
        torch.cuda.synchronize()
    if before is not None:
        before()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / reps


def sdpa_fn(torch, backend, q, k, v, G):
    """A zero-argument SDPA call with `backend` forced, and how GQA was handled, or
    (None, reason)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    be = getattr(SDPBackend, backend)
    F = torch.nn.functional.scaled_dot_product_attention
    tries = [("enable_gqa", q, k, v, dict(enable_gqa=True))] if G > 1 else []
    if G > 1:
        tries.append(("expanded", q, k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1),
                      {}))
    else:
        tries.append(("mha", q, k, v, {}))
    reason = "refused"
    for how, qq, kk, vv, kw in tries:
        def call(qq=qq, kk=kk, vv=vv, kw=kw):
            with sdpa_kernel([be]):
                return F(qq, kk, vv, **kw)
        try:
            out = call()
            torch.cuda.synchronize()
            return call, how, out
        except Exception as e:                       # noqa: BLE001 (the backend refuses)
            reason = f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
    return None, reason, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--nk", type=int, nargs="+", default=[1024, 8192, 65536])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--page", type=int, default=256)
    ap.add_argument("--splits", type=int, nargs="*", default=[1, 2, 4, 8, 16, 32, 64])
    ap.add_argument("--stages", type=int, choices=[2, 3, 4],
                    help="compile every tessel kernel with this many stages of its load ring")
    ap.add_argument("--no-sink-waits", action="store_true",
                    help="compile with GpuOptions(sink_waits=False): Q waited for before the "
                         "key loop's first copies (to compare)")
    ap.add_argument("--no-block-head-dim", action="store_true",
                    help="serving_checks.KVCACHE_BLOCK_HEAD_DIM off (--dim not read in blocks "
                         "of the next fast head dim)")
    args = ap.parse_args()
    torch = cuda_torch("bench_decode")
    if torch is None:
        return 0
    import tessel
    from tessel import serving_checks, serving_decode
    if args.no_block_head_dim:
        serving_checks.KVCACHE_BLOCK_HEAD_DIM = False
    if args.stages or args.no_sink_waits:
        compile_with(**({"num_stages": args.stages} if args.stages else {}),
                     **({"sink_waits": False} if args.no_sink_waits else {}))

    B, H, Hkv, D, page = args.batch, args.heads, args.kv_heads, args.dim, args.page
    G = H // Hkv
    dt = torch.float16
    timed, timer = make_timer(torch)
    chosen = []
    launch = serving_decode.launch

    def spy(*a, **kw):
        chosen.append(kw["n_splits"])
        return launch(*a, **kw)

    report = dict(device=torch.cuda.get_device_name(0), torch=torch.__version__, timer=timer,
                  stages=args.stages, sink_waits=not args.no_sink_waits,
                  shape=dict(B=B, H=H, Hkv=Hkv, D=D, Sq=1, dtype="fp16", page=page),
                  sms=torch.cuda.get_device_properties(0).multi_processor_count, rows=[],
                  sweep=[])
    warm_up(torch)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    for nk in args.nk:
        nbytes = 2 * B * nk * Hkv * D * 2
        q = torch.randn(B, 1, H, D, device="cuda", dtype=dt, generator=gen)
        kc = torch.randn(B, nk, Hkv, D, device="cuda", dtype=dt, generator=gen)
        vc = torch.randn(B, nk, Hkv, D, device="cuda", dtype=dt, generator=gen)
        seqlens = torch.full((B,), nk, dtype=torch.int32, device="cuda")
        pages = -(-nk // page)
        table = torch.randperm(B * pages, device="cuda", generator=gen).view(B, pages).int()
        kp = torch.zeros(B * pages, page, Hkv, D, device="cuda", dtype=dt)
        vp = torch.zeros_like(kp)
        for b in range(B):                           # the same keys, in the table's pages
            for p in range(pages):
                rows = slice(p * page, min(nk, (p + 1) * page))
                n = rows.stop - rows.start
                kp[table[b, p], :n] = kc[b, rows]
                vp[table[b, p], :n] = vc[b, rows]

        # SDPA on [B, H, 1, D] and a dense [B, Hkv, nk, D] cache.
        qs = q.permute(0, 2, 1, 3).contiguous()
        ks, vs = (x.permute(0, 2, 1, 3).contiguous() for x in (kc, vc))
        base = {}
        ref = None
        for name, backend in (("FA2", "FLASH_ATTENTION"), ("cuDNN", "CUDNN_ATTENTION")):
            fn, how, out = sdpa_fn(torch, backend, qs, ks, vs, G)
            if fn is None:
                base[name] = dict(error=how)
                continue
            ms = timed(fn)
            base[name] = dict(ms=ms, gbps=nbytes / ms / 1e6, gqa=how,
                              back_to_back_us=1e3 * time_back_to_back(torch, fn, 200))
            if ref is None:
                ref = out.permute(0, 2, 1, 3).float()   # [B, 1, H, D]
            del fn, out
        buf = torch.empty(nbytes // 2, device="cuda", dtype=dt)
        ms = timed(lambda: buf.clone())
        base["copy"] = dict(ms=ms, gbps=2 * nbytes / ms / 1e6)
        del buf, ks, vs, qs

        for layout, k_, v_, tbl in (("contiguous", kc, vc, None), ("paged", kp, vp, table)):
            row = dict(nk=nk, layout=layout, bytes=nbytes, results=dict(base))
            variants = (("tessel", {}), ("tessel 64x64", dict(block_m=64, block_n=64)),
                        ("tessel 1 split", dict(num_splits=1)))
            for name, kw in variants:
                call = (lambda k_=k_, v_=v_, tbl=tbl, kw=kw:
                        tessel.attention_with_kvcache(q, k_, v_, seqlens, block_table=tbl, **kw))
                try:
                    serving_decode.launch = spy
                    chosen.clear()
                    o = call()
                    torch.cuda.synchronize()
                    serving_decode.launch = launch
                    ms = timed(call)
                    res = dict(ms=ms, gbps=nbytes / ms / 1e6,
                               back_to_back_us=1e3 * time_back_to_back(torch, call, 200))
                    if chosen:
                        res["num_splits"] = chosen[0]
                    if ref is not None:
                        res["max_err"] = float((o.float() - ref).abs().max())
                except Exception as e:               # noqa: BLE001 (report, go on)
                    serving_decode.launch = launch
                    res = dict(error=f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
                row["results"][name] = res
            report["rows"].append(row)
            print_row(row)
        for n in args.splits:
            for layout, k_, v_, tbl in (("contiguous", kc, vc, None), ("paged", kp, vp, table)):
                sweep = dict(nk=nk, layout=layout, num_splits=n)
                try:
                    ms = timed(lambda n=n, k_=k_, v_=v_, tbl=tbl: tessel.attention_with_kvcache(
                        q, k_, v_, seqlens, block_table=tbl, num_splits=n, block_m=64,
                        block_n=64))
                    sweep.update(ms=ms, gbps=nbytes / ms / 1e6)
                except Exception as e:               # noqa: BLE001
                    sweep.update(error=str(e)[:200])
                report["sweep"].append(sweep)
                print(f"bench_decode: sweep nk={nk} {layout} {n} splits: "
                      f"{sweep.get('gbps', 0):,.0f} GB/s", flush=True)
        del q, kc, vc, kp, vp, table, ref
        torch.cuda.empty_cache()

    print(table_markdown(report))
    save_report(args.json, report)
    if args.json:
        print(f"bench_decode: wrote {args.json}")
    return 0


COLUMNS = ("tessel", "tessel 64x64", "tessel 1 split", "cuDNN", "FA2", "copy")


def gbps(res):
    return res.get("gbps") if res else None


def print_row(row):
    parts = [f"{n} {gbps(row['results'].get(n)) or 0:,.0f}" for n in COLUMNS]
    b2b = [f"{n} {row['results'][n]['back_to_back_us']:.0f}" for n in ("tessel", "cuDNN")
           if row["results"].get(n, {}).get("back_to_back_us")]
    print(f"bench_decode: nk={row['nk']} {row['layout']}: " + ", ".join(parts) + " GB/s; "
          f"back to back (µs/call): " + ", ".join(b2b), flush=True)


def table_markdown(report):
    s = report["shape"]
    lines = [f"Decode on {report['device']} ({report['sms']} SMs): b = {s['B']}, {s['H']} query "
             f"heads, {s['Hkv']} KV heads, d{s['D']}, {s['dtype']}, Sq = 1, page {s['page']}; "
             f"GB/s of K and V read ({report['timer']}); copy = (read + written) / time.", "",
             "| nk | cache | " + " | ".join(COLUMNS) + " | splits | best tessel / cuDNN | "
             "best tessel / copy | max err |",
             "|" + "---|" * (len(COLUMNS) + 6)]
    for row in report["rows"]:
        r = row["results"]
        cells = []
        for n in COLUMNS:
            v = gbps(r.get(n))
            cells.append(f"{v:,.0f}" if v else "error")
        ours = [gbps(r.get(n)) or 0 for n in COLUMNS[:3]]
        best = max(ours)
        cudnn, copy = gbps(r.get("cuDNN")), gbps(r.get("copy"))
        t = r.get("tessel", {})
        splits = f"{t.get('num_splits', 1)}"
        errs = [r[n].get("max_err") for n in COLUMNS[:3] if r.get(n, {}).get("max_err") is not None]
        ratio_cudnn = f"{best / cudnn:.2f}" if cudnn else "n/a"
        ratio_copy = f"{best / copy:.2f}" if copy else "n/a"
        err = f"{max(errs):.1e}" if errs else "n/a"
        lines.append(f"| {row['nk']} | {row['layout']} | " + " | ".join(cells) +
                     f" | {splits} | {ratio_cudnn} | {ratio_copy} | {err} |")
    if report["sweep"]:
        ns = sorted({e["num_splits"] for e in report["sweep"]})
        lines += ["", "64x64 blocks, by num_splits (GB/s):", "",
                  "| nk | cache | " + " | ".join(str(n) for n in ns) + " |",
                  "|" + "---|" * (len(ns) + 2)]
        for nk in sorted({e["nk"] for e in report["sweep"]}):
            for layout in ("contiguous", "paged"):
                got = {e["num_splits"]: e.get("gbps") for e in report["sweep"]
                       if e["nk"] == nk and e.get("layout", "contiguous") == layout}
                if got:
                    lines.append(f"| {nk} | {layout} | " + " | ".join(
                        f"{got[n]:,.0f}" if got.get(n) else "error" for n in ns) + " |")
    return "\n".join(lines)


ENV_OPTIONS = options_from_environment()

if __name__ == "__main__":
    sys.exit(main())
