"""GPU time per kernel of forward + backward (d128 fp16, b·n = 16k, h = 16, n = 4096,
non-causal and causal) with the float range specialisation (default) and without (generic),
one process each: which program the moderate scale changes.

    python3 bwd_kernels_ab.py
"""
import json
import subprocess
import sys


def child(generic):
    import torch
    from torch.profiler import ProfilerActivity, profile
    import tessel
    from tessel import runtime
    if generic:
        runtime.float_range = lambda value: "any"
    out = {}
    for causal in (False, True):
        n = 4096
        g = torch.Generator(device="cuda").manual_seed(1)
        q, k, v = (torch.randn(4, 16, n, 128, device="cuda", dtype=torch.float16, generator=g)
                   .requires_grad_() for _ in range(3))
        do = torch.randn_like(q)

        def step():
            tessel.attention(q, k, v, causal=causal).backward(do)
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                step()
            torch.cuda.synchronize()
        per = {}
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                per[e.name[:60]] = per.get(e.name[:60], 0.0) + e.device_time_total / 5 / 1000
        out["causal" if causal else "full"] = per
    print(json.dumps(out))


def main():
    if len(sys.argv) > 1:
        return child(sys.argv[1] == "generic")
    res = {}
    for r in range(2):
        for mode in ("default", "generic"):
            p = subprocess.run([sys.executable, __file__, mode], capture_output=True, text=True)
            if p.returncode:
                print(mode, "failed", p.stderr[-1500:])
                continue
            res.setdefault(mode, []).append(json.loads(p.stdout.strip().splitlines()[-1]))
    for case in ("full", "causal"):
        names = sorted({n for m in res.values() for r in m for n in r[case]})
        print(f"== {case}: ms per step (median of rounds) default / generic")
        for n in names:
            vals = {m: sorted(r[case].get(n, 0.0) for r in rs)[len(rs) // 2] for m, rs in res.items()}
            print(f"  {n:60} {vals.get('default', 0):8.3f} {vals.get('generic', 0):8.3f}")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
