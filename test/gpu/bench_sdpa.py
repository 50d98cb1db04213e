"""tessel.scaled_dot_product_attention beside torch's SDPA, the same call and the same attn_mask,
one process.

    PYTHONPATH=build/python python3 test/gpu/bench_sdpa.py [--json OUT.json] [--b 4] [--h 16]
        [--n 4096] [--d 128] [--dtype fp16] [--backward]

Cases: causal (is_causal; SDPA takes its flash or cuDNN kernel), a boolean key-padding mask
[B, 1, 1, S] (0, 1/8, 1/4 or 3/8 of a sequence's keys padded), a document mask as a boolean
[B, 1, L, S] tensor (four documents a sequence, causal), a float relative-position bias
[1, H, L, S]. With a
mask SDPA runs its memory-efficient or math kernel; tessel reads the mask in a mask_mod or
score_mod (boolean masks block-sparse through their block mask). Times: triton.testing.do_bench
medians of one call each (its output allocation included; --backward: forward + backward);
TFLOP/s count the allowed pairs, 4·d flops each (×3.5 with --backward). Without torch or CUDA it
prints why and exits 0.
"""
import argparse

from bench_decode import cuda_torch, make_timer, save_report
from mask_cases import document_ids


def make_masks(torch, B, H, N, gen):
    """name -> (attn_mask or None, is_causal, allowed pairs a head on average)."""
    kept = N - (torch.arange(B, device="cuda") % 4) * (N // 8)      # N, 7/8 N, 3/4 N, 5/8 N
    pad = torch.arange(N, device="cuda")[None, :] < kept[:, None]
    doc = document_ids(torch, B, N, gen)
    i = torch.arange(N, device="cuda")
    document = (doc[:, :, None] == doc[:, None, :]) & (i[:, None] >= i[None, :])
    bias = (-(i[:, None] - i[None, :]).abs().float() / N)[None] * \
        torch.linspace(0.5, 4, H, device="cuda")[:, None, None]
    return {
        "causal": (None, True, N * (N + 1) / 2),
        "padding": (pad[:, None, None, :], False, N * pad.float().sum(1).mean().item()),
        "document": (document[:, None], False, document.float().sum((1, 2)).mean().item()),
        "bias": (bias[None], False, float(N * N)),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--b", type=int, default=4)
    ap.add_argument("--h", type=int, default=16)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--dtype", choices=["fp16", "bf16"], default="fp16")
    ap.add_argument("--backward", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    torch = cuda_torch("bench_sdpa")
    if torch is None:
        return 0
    import tessel
    F = torch.nn.functional
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    timed, timer = make_timer(torch)
    gen = torch.Generator(device="cuda").manual_seed(0)
    B, H, N, D = args.b, args.h, args.n, args.d
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=dt, generator=gen)
               .requires_grad_(args.backward) for _ in range(3))
    do = torch.randn(B, H, N, D, device="cuda", dtype=dt, generator=gen)
    rows = {}
    print(f"B{B} H{H} N{N} d{D} {args.dtype}{' forward + backward' if args.backward else ''}; "
          f"TFLOP/s on allowed pairs ({timer})")
    print(f"{'case':>10} {'tessel':>8} {'SDPA':>8} {'tessel/SDPA':>12}")
    for name, (mask, causal, pairs) in make_masks(torch, B, H, N, gen).items():
        if mask is not None and mask.is_floating_point():
            mask = mask.to(dt)
        flops = 4.0 * D * pairs * B * H * (3.5 if args.backward else 1.0)
        out = {}
        for who, fn in (("tessel", tessel.scaled_dot_product_attention),
                        ("sdpa", F.scaled_dot_product_attention)):
            def call(fn=fn):
                o = fn(q, k, v, attn_mask=mask, is_causal=causal)
                if args.backward:
                    torch.autograd.grad(o, (q, k, v), do)
                return o
            call()
            out[who] = flops / timed(call) / 1e9
        rows[name] = out
        print(f"{name:>10} {out['tessel']:8.1f} {out['sdpa']:8.1f} "
              f"{out['tessel'] / out['sdpa']:12.2f}", flush=True)
    save_report(args.json, dict(args=vars(args), timer=timer,
                                device=torch.cuda.get_device_name(0), rows=rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
