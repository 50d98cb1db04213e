"""Variable-length batches: tessel.attention_varlen beside SDPA on the same tokens, one process
(issue 12).

    PYTHONPATH=build/python python3 test/gpu/bench_varlen.py [--json OUT.json]
        [--seqs 64] [--max-len 8192] [--h 16] [--hkv 16] [--d 128] [--dtype fp16] [--padded]
        [--no-block-head-dim]

A batch of `--seqs` sequences with random lengths from 1 to `--max-len` (seeded), packed without
padding: q [total, H, D], k/v [total, Hkv, D], FlashAttention-2's varlen layout. Timed per call:

- tessel: `tessel.attention_varlen(q, k, v, cu, cu, max_len, max_len, causal=...)` (its output
  allocation and the Python entry path);
- SDPA nested: the same tokens as nested tensors of the jagged layout (`torch.nested`,
  [B, j, H, D] transposed to [B, H, j, D]), built once before timing; SDPA picks its backend
  (FlashAttention-2's varlen kernel where it can);
- SDPA padded: the batch padded to the longest sequence, [B, H, max_len, D], cuDNN and FA2
  forced. Causal only, where right padding changes no real row (the padded rows and keys sit
  after every real one); non-causal would need a key mask, which those backends do not take.
  It computes the padding too: that is what padding costs.

With `--backward` each call is the forward and the backward (`out.backward(dout)`, the
gradients of q, k and v: packed-sequence training), tessel's through its autograd Function
(python/tessel/varlen_backward.py), and TFLOP/s count 3.5× the forward's (the backward's five
matmuls against the forward's two).

`--no-block-head-dim`: serving_checks.VARLEN_BLOCK_HEAD_DIM off (a --d tessel pads, 96 or 80,
copied padded, as before the forty-second session, instead of read in blocks of the padded
width inside the kernel).

`--blocks 128x128 128x64 ...`: tessel also timed with those query × key blocks (block_m,
block_n; the default is 64×64 on the fast paths), each printed beside the default as TFLOP/s
and its ratio to it — the A/B of larger blocks for the varlen kernel in one process.

`--tiles`: tessel also timed on the other grid (serving_checks.VARLEN_TILES_CUDA flipped, or
with --backward varlen_backward.TILES_CUDA: the compact grid of the batch's blocks against B
times the longest sequence's). `--short-max S`: every sequence but the first (max-len long)
drawn from 1 to S (a batch of one long document and many short ones).

`--dv N`: v (and o) of head dim N, not --d (MLA's 192/128). `--flip MODULE.NAME ...`: tessel
also timed with each boolean switch flipped (e.g. tessel.varlen_backward.VALUE_HEAD_DIM_CUDA).

`--padded`: --d padded where tessel runs it as it is (serving_checks.VARLEN_NATIVE_HEAD_DIMS
emptied: on sm_90a d192 padded to 256, as before the forty-second session).

TFLOP/s count the real pairs only (Σ len² · 4·d·H, half for causal). Also per row: the largest
|tessel − nested| relative to nested's largest value (a sanity check; the float64 checks are
test/gpu/test_serving_gpu.py). Timing: bench_decode.make_timer. Without torch or CUDA it prints
why and exits 0.
"""
import argparse
import importlib

from bench_decode import cuda_torch, make_timer, save_report


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--seqs", type=int, default=64)
    ap.add_argument("--max-len", type=int, default=8192)
    ap.add_argument("--h", type=int, default=16)
    ap.add_argument("--hkv", type=int, default=16)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--dtype", choices=["fp16", "bf16"], default="fp16")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backward", action="store_true",
                    help="time the forward and the backward together")
    ap.add_argument("--no-block-head-dim", action="store_true",
                    help="serving_checks.VARLEN_BLOCK_HEAD_DIM off (--d copied padded)")
    ap.add_argument("--padded", action="store_true",
                    help="--d padded, not as it is (serving_checks.VARLEN_NATIVE_HEAD_DIMS "
                         "emptied)")
    ap.add_argument("--blocks", nargs="*", default=[],
                    help="also time tessel with these MxN blocks (e.g. 128x128)")
    ap.add_argument("--short-max", type=int, default=0)
    ap.add_argument("--dv", type=int, default=0, help="v's head dim where it is not --d")
    ap.add_argument("--flip", nargs="*", default=[],
                    help="also time tessel with these boolean switches flipped "
                         "(e.g. tessel.varlen_backward.VALUE_HEAD_DIM_CUDA)")
    ap.add_argument("--tiles", action="store_true",
                    help="also time tessel on the other grid (serving_checks.VARLEN_TILES_CUDA "
                         "flipped)")
    args = ap.parse_args()
    blocks = [tuple(int(n) for n in b.split("x")) for b in args.blocks]
    torch = cuda_torch("bench_varlen")
    if torch is None:
        return 0
    import tessel
    from torch.nn.attention import SDPBackend, sdpa_kernel
    if args.no_block_head_dim:
        from tessel import serving_checks
        serving_checks.VARLEN_BLOCK_HEAD_DIM = False
    if args.padded:
        from tessel import serving_checks
        serving_checks.VARLEN_NATIVE_HEAD_DIMS = {}

    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    H, Hkv, D = args.h, args.hkv, args.d
    Dv = args.dv or D
    # --tiles: the compact grid's switch of what is timed (the forward's, or the backward's).
    flips = args.flip + (["tessel.varlen_backward.TILES_CUDA" if args.backward else
                          "tessel.serving_checks.VARLEN_TILES_CUDA"] if args.tiles else [])
    timed, timer = make_timer(torch)
    gen = torch.Generator(device="cpu").manual_seed(args.seed)
    lengths = torch.randint(1, (args.short_max or args.max_len) + 1, (args.seqs,),
                            generator=gen)
    lengths[0] = args.max_len                       # the longest present: max_len is real
    cu = torch.zeros(args.seqs + 1, dtype=torch.int32)
    cu[1:] = torch.cumsum(lengths, 0)
    total, longest = int(cu[-1]), int(lengths.max())
    cu_d = cu.cuda()
    grad = dict(requires_grad=True) if args.backward else {}
    q = torch.randn(total, H, D, device="cuda", dtype=dt, **grad)
    k, v = (torch.randn(total, Hkv, d, device="cuda", dtype=dt, **grad) for d in (D, Dv))
    dout = torch.randn(total, H, Dv, device="cuda", dtype=dt)
    pairs = float((lengths.double() ** 2).sum())
    F = torch.nn.functional.scaled_dot_product_attention
    report = dict(device=torch.cuda.get_device_name(0), torch=torch.__version__, timer=timer,
                  dtype=args.dtype, seqs=args.seqs, max_len=args.max_len, h=H, hkv=Hkv, d=D,
                  total=total, lengths=lengths.tolist(), backward=args.backward, rows=[])
    print(f"{'forward + backward: ' if args.backward else ''}{args.seqs} sequences of "
          f"1..{args.max_len} tokens ({total} in all), H{H} Hkv{Hkv} D{D}"
          f"{f' Dv{Dv}' if Dv != D else ''} {args.dtype}; "
          f"TFLOP/s on real pairs; {timer}")
    print(f"{'causal':>6} {'tessel':>8} {'nested':>8} {'pad cuDNN':>9} {'pad FA2':>8} "
          f"{'/best':>6} {'diff':>8}")

    offsets = cu_d.long()     # one tensor: views of it share their ragged dimension

    def nested(x):
        t = torch.nested.nested_tensor_from_jagged(x, offsets)
        return t.transpose(1, 2)                    # [B, heads, j, D]

    def padded(x):
        out = x.new_zeros(args.seqs, longest, x.shape[1], x.shape[2])
        for b in range(args.seqs):
            out[b, :lengths[b]] = x[cu[b]:cu[b + 1]]
        return out.transpose(1, 2).contiguous()     # [B, heads, max_len, D]

    def with_backward(forward, dy):
        """forward() alone, or forward() then its backward against dy (--backward); the
        output."""
        def call():
            y = forward()
            if args.backward:
                y.backward(dy(y))
            return y
        return call
    with torch.no_grad():
        qp, kp, vp = padded(q), padded(k), padded(v)
    if args.backward:
        qp, kp, vp = (x.requires_grad_() for x in (qp, kp, vp))
    doutp = padded(dout)
    gqa = dict(enable_gqa=True) if Hkv != H else {}
    for causal in (False, True):
        flops = 2.0 * (D + Dv) * H * pairs / (2 if causal else 1) * \
            (3.5 if args.backward else 1)
        row = dict(causal=causal)

        ours = with_backward(lambda: tessel.attention_varlen(q, k, v, cu_d, cu_d, longest,
                                                             longest, causal=causal),
                             lambda y: dout)
        mine = ours().detach()
        row["tessel_ms"] = timed(ours)
        try:
            # With --backward the nested views are made in the call (a graph a call, down to
            # q, k and v); the forward alone reads views built once, as before.
            views = None if args.backward else (nested(q), nested(k), nested(v))
            theirs = with_backward(lambda: F(*(views or (nested(q), nested(k), nested(v))),
                                             is_causal=causal, **gqa),
                                   lambda y: nested(dout))
            want = theirs().detach()
            row["nested_ms"] = timed(theirs)
            ref = want.transpose(1, 2).values()     # packed [total, H, D]
            row["max_rel_diff_vs_nested"] = ((mine.float() - ref.float()).abs().max()
                                             / ref.float().abs().max()).item()
        except Exception as e:                       # noqa: BLE001 (nested SDPA refuses)
            row["nested_why"] = f"{type(e).__name__}: {str(e)[:160]}"
        for name, be in (("pad_cudnn", SDPBackend.CUDNN_ATTENTION),
                         ("pad_fa2", SDPBackend.FLASH_ATTENTION)):
            if not causal:
                continue
            try:
                with sdpa_kernel([be]):
                    pad = with_backward(lambda: F(qp, kp, vp, is_causal=True, **gqa),
                                        lambda y: doutp)
                    pad()
                    row[f"{name}_ms"] = timed(pad)
            except Exception as e:                   # noqa: BLE001 (the backend refuses)
                row[f"{name}_why"] = f"{type(e).__name__}: {str(e)[:160]}"
        for key in ("tessel", "nested", "pad_cudnn", "pad_fa2"):
            ms = row.get(f"{key}_ms")
            row[f"{key}_tflops"] = flops / ms / 1e9 if ms else None
        best = min((row[f"{key}_ms"] for key in ("nested", "pad_cudnn", "pad_fa2")
                    if row.get(f"{key}_ms")), default=None)
        row["tessel_over_best"] = best / row["tessel_ms"] if best else None
        report["rows"].append(row)

        def tf(x):
            return f"{row[x + '_tflops']:.1f}" if row.get(x + "_tflops") else "-"
        ratio = f"{row['tessel_over_best']:.2f}" if best else "-"
        print(f"{str(causal):>6} {tf('tessel'):>8} {tf('nested'):>8} {tf('pad_cudnn'):>9} "
              f"{tf('pad_fa2'):>8} {ratio:>6} "
              f"{row.get('max_rel_diff_vs_nested', float('nan')):>8.2e}", flush=True)
        for key in ("nested", "pad_cudnn", "pad_fa2"):
            if row.get(f"{key}_why"):
                print(f"{'':>6} {key}: {row[key + '_why']}")
        for bm, bn in blocks:
            other = with_backward(lambda: tessel.attention_varlen(
                q, k, v, cu_d, cu_d, longest, longest, causal=causal, block_m=bm, block_n=bn),
                lambda y: dout)
            got = other().detach()
            ms = timed(other)
            diff = ((got.float() - mine.float()).abs().max() / mine.float().abs().max()).item()
            row[f"tessel_{bm}x{bn}_ms"] = ms
            print(f"{'':>6} tessel {bm}x{bn}: {flops / ms / 1e9:.1f} TFLOP/s, "
                  f"{row['tessel_ms'] / ms:.3f}x the default, diff {diff:.2e}", flush=True)
        for flip in flips:
            module, name = importlib.import_module(flip.rsplit(".", 1)[0]), flip.rsplit(".", 1)[1]
            was = getattr(module, name)
            setattr(module, name, not was)
            got = ours().detach()
            ms = timed(ours)
            setattr(module, name, was)
            diff = ((got.float() - mine.float()).abs().max() / mine.float().abs().max()).item()
            row[f"tessel_{name}_{not was}_ms"] = ms
            print(f"{'':>6} tessel {name}={not was}: {flops / ms / 1e9:.1f} TFLOP/s, "
                  f"{row['tessel_ms'] / ms:.3f}x the default, diff {diff:.2e}", flush=True)
    save_report(args.json, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
