"""A/B of the float range specialisation (tile.moderate) on the forward: the default (a
moderate scale compiles without the branch on the scale) against the generic kernel (every
float keyed "any", as before 2026-12-04), one configuration a process, alternating, beside
cuDNN in each process. Same scale value (1/sqrt(d)) both ways.

    python3 ab_scale_branch.py [--rounds 3] [--json OUT]
"""
import argparse
import json
import subprocess
import sys

CASES = [(128, 1024, False), (128, 4096, False), (128, 16384, False), (128, 4096, True),
         (128, 16384, True), (64, 4096, False), (64, 16384, True)]
BACKWARD = [(128, 4096, False), (128, 16384, True)]


def child(generic):
    import torch
    import triton.testing
    import tessel
    from tessel import runtime
    from torch.nn.attention import SDPBackend, sdpa_kernel
    if generic:
        runtime.float_range = lambda value: "any"
    F = torch.nn.functional.scaled_dot_product_attention
    rows = []
    for D, n, causal in CASES:
        B, H = 16384 // n, 2048 // D
        g = torch.Generator(device="cuda").manual_seed(n + D)
        q, k, v = (torch.randn(B, H, n, D, device="cuda", dtype=torch.float16, generator=g)
                   for _ in range(3))
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            ref = F(q, k, v, is_causal=causal)
            t_ref = triton.testing.do_bench(lambda: F(q, k, v, is_causal=causal))
        out = tessel.attention(q, k, v, causal=causal)
        err = ((out.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
        t = triton.testing.do_bench(lambda: tessel.attention(q, k, v, causal=causal))
        fl = 4 * B * H * n * n * D / (2 if causal else 1)
        rows.append(dict(D=D, n=n, causal=causal, tessel=fl / t / 1e9, cudnn=fl / t_ref / 1e9,
                         err=err, what="fwd"))
    for D, n, causal in BACKWARD:
        B, H = 16384 // n, 2048 // D
        g = torch.Generator(device="cuda").manual_seed(n + D)
        q, k, v = (torch.randn(B, H, n, D, device="cuda", dtype=torch.float16, generator=g)
                   .requires_grad_() for _ in range(3))
        do = torch.randn_like(q)

        def step(fn):
            def run():
                fn().backward(do)
            return run
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            t_ref = triton.testing.do_bench(step(lambda: F(q, k, v, is_causal=causal)))
        t = triton.testing.do_bench(step(lambda: tessel.attention(q, k, v, causal=causal)))
        fl = 4 * B * H * n * n * D * 3.5 / (2 if causal else 1)      # forward + backward
        rows.append(dict(D=D, n=n, causal=causal, tessel=fl / t / 1e9, cudnn=fl / t_ref / 1e9,
                         err=0.0, what="fwd+bwd"))
    print(json.dumps(rows))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child", choices=["default", "generic"])
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.child:
        return child(args.child == "generic")
    results = []
    for r in range(args.rounds):
        for mode in ("default", "generic"):
            p = subprocess.run([sys.executable, __file__, "--child", mode], capture_output=True,
                               text=True)
            if p.returncode:
                print(mode, "failed:", p.stderr[-2000:], flush=True)
                continue
            for row in json.loads(p.stdout.strip().splitlines()[-1]):
                row.update(mode=mode, round=r)
                results.append(row)
                print(f"r{r} {mode:>8} {row['what']:>7} d{row['D']} n={row['n']:>6} {'causal' if row['causal'] else 'full':>6}"
                      f" tessel {row['tessel']:6.1f} cudnn {row['cudnn']:6.1f} "
                      f"ratio {row['tessel'] / row['cudnn']:.3f} err {row['err']:.1e}", flush=True)
    # Medians of tessel / cuDNN per case and mode, and default / generic.
    import statistics
    print("case                 default  generic  default/generic")
    for what, cases in (("fwd", CASES), ("fwd+bwd", BACKWARD)):
        for D, n, causal in cases:
            med = {m: statistics.median(x["tessel"] / x["cudnn"] for x in results
                                        if x["mode"] == m and x["what"] == what and
                                        (x["D"], x["n"], x["causal"]) == (D, n, causal))
                   for m in ("default", "generic")}
            print(f"{what:>7} d{D} n={n:>6} {'causal' if causal else 'full':>6}   "
                  f"{med['default']:.3f}    {med['generic']:.3f}    "
                  f"{med['default'] / med['generic']:.3f}")
    if args.json:
        json.dump(results, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
