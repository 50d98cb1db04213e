"""Upper bound of skipping O's rescale in the overlapped consumers: tessel.attention non-causal
(fp16, b·n = 16k tokens, h·d = 2048, whole key blocks) with the dense kernel's cubin replaced
by one assembled from its PTX (BASE) or from the same PTX without the key loop's in-place
O·alpha multiplies (wrong results: speed only). One configuration a process, in rounds.

    python3 cubin_bound.py D NAME=FILE.cubin ... [--rounds 2]
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def child(D, cubin):
    sys.path.insert(0, os.path.join(HERE, "../../../test/gpu"))
    import torch
    from bench_decode import make_timer
    import tessel
    from tessel import cache
    blob = open(cubin, "rb").read()
    original, swapped = cache.get_binary, []

    def swap(kernel, gpu=None, directory=None):
        b = original(kernel, gpu, directory)
        spec = {e[0]: e[-1] for e in b.manifest["ingredients"]["specialization"]}
        if spec.get("D") == D and not spec.get("CAUSAL") and spec.get("EVEN_N") and \
                spec.get("SCORE_MOD") is None and not getattr(gpu, "producer_once", False):
            swapped.append(b.name)
            return type(b)(**{**b.__dict__, "cubin": blob})
        return b
    cache.get_binary = swap
    timed, _ = make_timer(torch)
    F = torch.nn.functional.scaled_dot_product_attention
    from torch.nn.attention import SDPBackend, sdpa_kernel
    rows = []
    for n in (4096, 16384):
        B, H = 16384 // n, 2048 // D
        q, k, v = (torch.randn(B, H, n, D, device="cuda", dtype=torch.float16) for _ in range(3))
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            ref = F(q, k, v)
            t_ref = timed(lambda: F(q, k, v))
        out = tessel.attention(q, k, v)
        err = ((out.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
        t = timed(lambda: tessel.attention(q, k, v))
        fl = 4 * B * H * n * n * D
        rows.append(dict(n=n, tessel=fl / t / 1e9, cudnn=fl / t_ref / 1e9, err=err))
    assert swapped, "the cubin was not used"
    print(json.dumps(dict(rows=rows, kernels=sorted(set(swapped)))))


def main():
    if sys.argv[1] == "--child":
        return child(int(sys.argv[2]), sys.argv[3])
    D = int(sys.argv[1])
    modes = [a.split("=", 1) for a in sys.argv[2:] if "=" in a]
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 2
    for r in range(rounds):
        for name, cubin in modes:
            p = subprocess.run([sys.executable, __file__, "--child", str(D), cubin],
                               capture_output=True, text=True, timeout=300)
            if p.returncode:
                print(name, "failed:", p.stderr[-1500:], flush=True)
                continue
            res = json.loads(p.stdout.strip().splitlines()[-1])
            for row in res["rows"]:
                print(f"r{r} d{D} {name:>9} n={row['n']:>6} tessel {row['tessel']:6.1f} "
                      f"cudnn {row['cudnn']:6.1f} ratio {row['tessel'] / row['cudnn']:.3f} "
                      f"err {row['err']:.1e} {res['kernels']}", flush=True)


if __name__ == "__main__":
    main()
