"""Per-tile cost of the persistent d128 forward: tessel beside cuDNN (do_bench medians, one
configuration a process, in rounds), d128 fp16, b·n = 16k tokens, h = 16.

Modes:
- default: tessel's policy (Q from the producer where tiles visit <= 16 key blocks);
- once: Q from the producer at every length (grid.PRODUCER_ONCE_MAX_BLOCKS raised);
- nobar: once, with the cubin of the producer-once kernel replaced by one assembled here from
  its PTX less the `bar.sync 1, 256` after Q's wait at each tile start (cubins given as
  --nobar F.cubin C.cubin, non-causal and causal);
- synconce: once, with overlap_consumers=False (synchronous consumers taking turns around the
  softmax), whose PTX has no such barrier.

    python3 once_ab.py --nobar nobar_f.cubin nobar_c.cubin [--rounds 2] [--json OUT]
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = [(1024, False), (4096, False), (4096, True), (16384, False), (16384, True)]


def child(mode, cubins):
    sys.path.insert(0, os.path.join(HERE, "../../../test/gpu"))
    import torch
    from bench_decode import compile_with, make_timer
    if mode == "synconce":
        compile_with(overlap_consumers=False)
    import tessel
    from tessel import cache, grid
    from torch.nn.attention import SDPBackend, sdpa_kernel
    if mode != "default":
        grid.PRODUCER_ONCE_MAX_BLOCKS = 1 << 30
    swapped = {"count": 0}
    if mode == "nobar":
        original = cache.get_binary
        blobs = {False: open(cubins[0], "rb").read(), True: open(cubins[1], "rb").read()}

        def swap(kernel, gpu=None, directory=None):
            b = original(kernel, gpu, directory)
            spec = {e[0]: e[-1] for e in b.manifest["ingredients"]["specialization"]}
            if b.name == "persistent_attention_kernel" and spec.get("D") == 128 and \
                    spec.get("SCORE_MOD") is None and spec.get("MASK_MOD") is None and \
                    b.manifest["ingredients"]["options"].get("gpu.producer_once") is True:
                swapped["count"] += 1
                return type(b)(**{**b.__dict__, "cubin": blobs[bool(spec.get("CAUSAL"))]})
            return b
        cache.get_binary = swap
    timed, _ = make_timer(torch)
    F = torch.nn.functional.scaled_dot_product_attention
    rows = []
    for n, causal in CASES:
        B, H, D = 16384 // n, 16, 128
        g = torch.Generator(device="cuda").manual_seed(n + causal)
        q, k, v = (torch.randn(B, H, n, D, device="cuda", dtype=torch.float16, generator=g)
                   for _ in range(3))
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            ref = F(q, k, v, is_causal=causal)
            t_ref = timed(lambda: F(q, k, v, is_causal=causal))
        out = tessel.attention(q, k, v, causal=causal)
        err = ((out.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
        t = timed(lambda: tessel.attention(q, k, v, causal=causal))
        fl = 4 * B * H * n * n * D / (2 if causal else 1)
        rows.append(dict(n=n, causal=causal, tessel=fl / t / 1e9, cudnn=fl / t_ref / 1e9,
                         err=err))
    if mode == "nobar":
        assert swapped["count"] >= 2, "the edited cubins were not loaded"
    print(json.dumps(rows))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modes", nargs="+", default=["default", "once", "nobar", "synconce"])
    ap.add_argument("--nobar", nargs=2, default=None)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--child")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.child:
        return child(args.child, args.nobar)
    results = []
    for r in range(args.rounds):
        for mode in args.modes:
            cmd = [sys.executable, __file__, "--child", mode]
            if args.nobar:
                cmd += ["--nobar", *args.nobar]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=200)
            if p.returncode:
                print(mode, "failed:", p.stderr[-2000:], flush=True)
                continue
            for row in json.loads(p.stdout.strip().splitlines()[-1]):
                row.update(mode=mode, round=r)
                print(f"r{r} {mode:>9} n={row['n']:>6} {'causal' if row['causal'] else 'full':>6}"
                      f" tessel {row['tessel']:6.1f} cudnn {row['cudnn']:6.1f} ratio "
                      f"{row['tessel'] / row['cudnn']:.3f} err {row['err']:.1e}", flush=True)
                results.append(row)
    if args.json:
        json.dump(results, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
