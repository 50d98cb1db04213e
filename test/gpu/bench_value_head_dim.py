#!/usr/bin/env python3
"""v with a head dim of its own (SDPA's Ev; DeepSeek's MLA prefill: q/k 192, v 128), forward,
side by side in one process: tessel padded (the default: v to E, then d192 to 256), with head
dim 192 as it is (attention.NATIVE_HEAD_DIMS) and v padded, and with the DV kernel
(attention.VALUE_HEAD_DIM_KERNEL), beside SDPA's cuDNN and FA2 backends where they take it.

    python3 test/gpu/bench_value_head_dim.py [--dims 192x128 128x64] [--lengths 4096 16384]

b·n = 16k tokens, h·E = 2048 (h = 10 at 192). TFLOP/s count 2·b·h·n²·(E + Ev) (half causal),
the work of the unpadded call; do_bench median, each call with its output allocation.

`--backward`: each call the forward and the backward (`o.backward(do)`, MLA training), tessel
padded (v to E for the whole call) beside its DV routes with gradients
(attention.VALUE_HEAD_DIM_GRAD: the DV forward, the backward on v, o and dO padded; with
backward.VALUE_HEAD_DIM_BACKWARD_CHIPS the backward's programs at v's width too), and SDPA's
cuDNN where it takes the call; TFLOP/s count 3.5× the forward's work."""
import argparse
import importlib
import math

from bench_decode import cuda_torch, make_timer, max_rel_diff, time_sdpa


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dims", nargs="+", default=["192x128", "128x64"])
    ap.add_argument("--lengths", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--dtype", choices=["fp16", "bf16"], default="fp16")
    ap.add_argument("--backward", action="store_true")
    args = ap.parse_args()
    torch = cuda_torch("bench_value_head_dim")
    if torch is None:
        return 0
    import tessel
    from torch.nn.attention import SDPBackend
    attn = importlib.import_module("tessel.attention")
    timed, timer = make_timer(torch)
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    gen = torch.Generator(device="cuda").manual_seed(0)
    variants = [("padded", {}), ("native192", {"NATIVE_HEAD_DIMS": {"sm_90a": (192,)}}),
                ("DV", {"NATIVE_HEAD_DIMS": {"sm_90a": (192,)}, "VALUE_HEAD_DIM_KERNEL": True})]
    if args.backward:
        return training(torch, tessel, attn, args, timed, timer, dt, gen)
    print(f"{args.dtype}; TFLOP/s of the unpadded work; {timer}")
    print(f"{'E':>4} {'Ev':>4} {'n':>6} {'causal':>6} " +
          " ".join(f"{name:>10}" for name, _ in variants) + f" {'cuDNN':>8} {'FA2':>8}  diff")
    with torch.no_grad():
        for E, Ev, H, n, B, causal in shapes(args):
            q, k = (torch.randn(B, H, n, E, device="cuda", dtype=dt, generator=gen)
                    for _ in range(2))
            v = torch.randn(B, H, n, Ev, device="cuda", dtype=dt, generator=gen)
            flops = 2 * B * H * n * n * (E + Ev) / (2 if causal else 1)
            cells, outs = [], []
            for _, switches in variants:
                saved = {name: getattr(attn, name) for name in switches}
                for name, value in switches.items():
                    setattr(attn, name, value)
                try:
                    outs.append(tessel.attention(q, k, v, causal=causal))
                    ms = timed(lambda: tessel.attention(q, k, v, causal=causal))
                    cells.append(f"{flops / ms / 1e9:>10.1f}")
                finally:
                    for name, value in saved.items():
                        setattr(attn, name, value)
            row = {}
            theirs = time_sdpa(torch, row, timed, q, k, v, causal,
                               (("cudnn", SDPBackend.CUDNN_ATTENTION),
                                ("fa2", SDPBackend.FLASH_ATTENTION)))
            for name in ("cudnn", "fa2"):
                ms = row.get(f"{name}_ms")
                cells.append(f"{flops / ms / 1e9:>8.1f}" if ms else f"{'-':>8}")
            base = theirs.get("cudnn", outs[0])
            diff = max(max_rel_diff(o, base) for o in outs)
            print(f"{E:>4} {Ev:>4} {n:>6} {str(causal):>6} {' '.join(cells)}  "
                  f"{diff:.1e}", flush=True)
    print(f"scale 1/sqrt(E) = {1 / math.sqrt(E):.4f} everywhere")
    return 0


def shapes(args):
    """(E, Ev, H, n, B, causal) of each case: b·n = 16k tokens, h·E = 2048."""
    for dims in args.dims:
        E, Ev = (int(x) for x in dims.split("x"))
        for n in args.lengths:
            for causal in (False, True):
                yield E, Ev, max(1, 2048 // E), n, max(1, 16384 // n), causal


def training(torch, tessel, attn, args, timed, timer, dt, gen):
    """--backward: forward + backward, padded against VALUE_HEAD_DIM_GRAD, beside cuDNN."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    print(f"{args.dtype}; forward + backward; TFLOP/s of the unpadded work (3.5x the forward's); "
          f"{timer}")
    bw = importlib.import_module("tessel.backward")
    routes = [("padded", False, ()), ("DV fwd", True, ()), ("DV both", True, ("sm_90a",))]
    defaults = attn.VALUE_HEAD_DIM_GRAD, bw.VALUE_HEAD_DIM_BACKWARD_CHIPS
    print(f"{'E':>4} {'Ev':>4} {'n':>6} {'causal':>6} " +
          " ".join(f"{name:>8}" for name, _, _ in routes) + f" {'both/pad':>8} {'cuDNN':>8}"
          "  grad diff")
    for E, Ev, H, n, B, causal in shapes(args):
        q, k = (torch.randn(B, H, n, E, device="cuda", dtype=dt, generator=gen)
                .requires_grad_() for _ in range(2))
        v = torch.randn(B, H, n, Ev, device="cuda", dtype=dt, generator=gen).requires_grad_()
        do = torch.randn(B, H, n, Ev, device="cuda", dtype=dt, generator=gen)
        flops = 3.5 * 2 * B * H * n * n * (E + Ev) / (2 if causal else 1)

        def step(f):
            def call():
                q.grad = k.grad = v.grad = None
                f().backward(do)
            return call
        cells, grads = [], []
        for _, fwd, chips in routes:
            attn.VALUE_HEAD_DIM_GRAD, bw.VALUE_HEAD_DIM_BACKWARD_CHIPS = fwd, chips
            one = step(lambda: tessel.attention(q, k, v, causal=causal))
            one()
            grads.append([x.grad.float() for x in (q, k, v)])
            cells.append(timed(one))
        attn.VALUE_HEAD_DIM_GRAD, bw.VALUE_HEAD_DIM_BACKWARD_CHIPS = defaults
        try:
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                sd = step(lambda: torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, is_causal=causal))
                sd()
                cudnn = f"{flops / timed(sd) / 1e9:>8.1f}"
        except Exception:                      # noqa: BLE001 (cuDNN refuses)
            cudnn = f"{'-':>8}"
        diff = max(((a - b).abs().max() / b.abs().max()).item()
                   for got in grads[1:] for a, b in zip(got, grads[0]))
        print(f"{E:>4} {Ev:>4} {n:>6} {str(causal):>6} " +
              " ".join(f"{flops / ms / 1e9:>8.1f}" for ms in cells) +
              f" {cells[0] / cells[2]:>8.3f} {cudnn}  {diff:.1e}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
