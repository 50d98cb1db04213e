"""tessel's persistent d128 forward beside cuDNN under GpuOptions variants, optionally with the
persistent kernel's cubin replaced by one assembled from edited PTX (do_bench medians, one
configuration a process, in rounds; fp16, b·n = 16k tokens, h·d = 2048; --d 128 default).

A mode is NAME[:FIELD=VALUE,...][:FULL.cubin,CAUSAL.cubin]. The fields are GpuOptions fields
for every kernel (bench_decode.compile_with); `once` among them (once=True) sends Q through the
producer at every length (grid.PRODUCER_ONCE_MAX_BLOCKS raised), never_once=True at none
(grid.PRODUCER_ONCE_GPU off), persist=BMxBN runs the BMxBN kernels persistent too
(grid.PERSISTENT_BLOCKS; twenty-third session), blocks=BMxBN makes BMxBN the dense kernels'
blocks at that head dim (attention.GPU_BLOCKS_UNMASKED and GPU_BLOCKS_CAUSAL_LONG) and runs
it persistent (twenty-fourth session); the cubins replace the
d128 persistent kernel built with those options (non-causal / causal).

    python3 cubin_ab.py default tma:tma_producer=True,once=True \\
        tmanf:tma_producer=True,once=True:nf_f.cubin,nf_c.cubin [--rounds 2] [--json OUT]
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = [(1024, False), (4096, False), (4096, True), (16384, False), (16384, True)]


def parse(mode):
    name, _, rest = mode.partition(":")
    fields, _, cubins = rest.partition(":")
    options = {}
    for item in filter(None, fields.split(",")):
        key, _, text = item.partition("=")
        options[key] = {"True": True, "False": False}.get(
            text, int(text) if text.isdigit() else text)
    return name, options, cubins.split(",") if cubins else None


def child(mode, D=128):
    sys.path.insert(0, os.path.join(HERE, "../../../test/gpu"))
    import torch
    from bench_decode import compile_with, make_timer
    _, options, cubins = parse(mode)
    once = options.pop("once", False)
    never_once = options.pop("never_once", False)
    persist = options.pop("persist", None)
    blocks = options.pop("blocks", None)
    if options:
        compile_with(**options)
    import tessel
    from tessel import cache, grid
    from torch.nn.attention import SDPBackend, sdpa_kernel
    if once:
        grid.PRODUCER_ONCE_MAX_BLOCKS = 1 << 30
    if never_once:
        grid.PRODUCER_ONCE_GPU = False
    if persist:
        grid.PERSISTENT_BLOCKS = grid.PERSISTENT_BLOCKS | {
            ("sm_90a",) + tuple(int(x) for x in persist.split("x"))}
    if blocks:
        at = sys.modules["tessel.attention"]     # the module (tessel.attention is the function)
        bm, bn = (int(x) for x in blocks.split("x"))
        at.GPU_BLOCKS_UNMASKED[("sm_90a", D)] = at.GPU_BLOCKS_CAUSAL_LONG[("sm_90a", D)] = (bm, bn)
        grid.PERSISTENT_BLOCKS = grid.PERSISTENT_BLOCKS | {("sm_90a", bm, bn)}
    swapped = {"count": 0}
    if cubins:
        original = cache.get_binary
        blobs = {False: open(cubins[0], "rb").read(), True: open(cubins[1], "rb").read()}

        def swap(kernel, gpu=None, directory=None):
            b = original(kernel, gpu, directory)
            spec = {e[0]: e[-1] for e in b.manifest["ingredients"]["specialization"]}
            if b.name == "persistent_attention_kernel" and spec.get("D") == D and \
                    spec.get("SCORE_MOD") is None and spec.get("MASK_MOD") is None:
                swapped["count"] += 1
                return type(b)(**{**b.__dict__, "cubin": blobs[bool(spec.get("CAUSAL"))]})
            return b
        cache.get_binary = swap
    timed, _ = make_timer(torch)
    F = torch.nn.functional.scaled_dot_product_attention
    rows = []
    for n, causal in CASES:
        B, H = 16384 // n, 2048 // D
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
    if cubins:
        assert swapped["count"] >= 2, "the edited cubins were not loaded"
    print(json.dumps(rows))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("modes", nargs="+")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--d", type=int, default=128, help="head dim (h·d = 2048)")
    ap.add_argument("--child")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.child:
        return child(args.child, args.d)
    results = []
    for r in range(args.rounds):
        for mode in args.modes:
            name = parse(mode)[0]
            p = subprocess.run([sys.executable, __file__, "x", "--child", mode, "--d",
                                str(args.d)], capture_output=True, text=True, timeout=200)
            if p.returncode:
                print(name, "failed:", p.stderr[-2000:], flush=True)
                continue
            for row in json.loads(p.stdout.strip().splitlines()[-1]):
                row.update(mode=name, round=r)
                print(f"r{r} {name:>12} n={row['n']:>6} "
                      f"{'causal' if row['causal'] else 'full':>6} tessel {row['tessel']:6.1f} "
                      f"cudnn {row['cudnn']:6.1f} ratio {row['tessel'] / row['cudnn']:.3f} "
                      f"err {row['err']:.1e}", flush=True)
                results.append(row)
    if args.json:
        json.dump(results, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
