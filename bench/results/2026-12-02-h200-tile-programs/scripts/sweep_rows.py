"""The row sweep of the sixth session (issue 18): softmax and two layer norms (weight and bias read
before the reductions, as examples/python/layer_norm.py does, or after) at every BLOCK_R x
num_warps, beside torch, in GB/s of x read and y written; OUT=dir for sweep_ln.json.

    OUT=. python3 sweep_rows.py [RxC ...]     # tessel importable (PYTHONPATH)
"""
import json, os, pathlib, sys
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[4] / "examples" / "python"))
import torch, triton.testing
import tessel
from tessel import language as tl
import layer_norm as L, softmax as S
from _common import cdiv, next_power_of_2


@tessel.jit
def ln_late(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, R, C, eps,
            BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    r0 = tl.program_id(0) * BLOCK_R
    xd = tl.make_desc(x_ptr, shape=(R, C), strides=(C, 1))
    yd = tl.make_desc(y_ptr, shape=(R, C), strides=(C, 1))
    wd = tl.make_desc(w_ptr, shape=(C,), strides=(1,))
    bd = tl.make_desc(b_ptr, shape=(C,), strides=(1,))
    x = tl.load(xd, (r0, 0), shape=(BLOCK_R, BLOCK_C)).to(tl.float32)
    mean = tl.sum(x, 1) / C
    inside = (tl.arange(0, BLOCK_C) < C)[None, :]
    centred = tl.where(inside, x - mean[:, None], 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(centred * centred, 1) / C + eps)
    w = tl.load(wd, (0,), shape=(BLOCK_C,)).to(tl.float32)
    b = tl.load(bd, (0,), shape=(BLOCK_C,)).to(tl.float32)
    y = centred * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(yd, (r0, 0), y.to(y_ptr.dtype))
    tl.store(tl.make_desc(mean_ptr, shape=(R,), strides=(1,)), (r0,), mean)
    tl.store(tl.make_desc(rstd_ptr, shape=(R,), strides=(1,)), (r0,), rstd)


def bench(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")


out = {"rows": []}
F = torch.nn.functional
SHAPES = [tuple(map(int, a.split('x'))) for a in sys.argv[1:]] or [(32768, 1024), (4096, 8192), (8192, 4096), (16384, 2048), (4096, 10000)]
for R, C in SHAPES:
    x = torch.randn(R, C, device="cuda", dtype=torch.float16)
    w = torch.randn(C, device="cuda", dtype=torch.float16)
    b = torch.randn(C, device="cuda", dtype=torch.float16)
    moved = 2.0 * R * C * 2
    t_ln = bench(lambda: F.layer_norm(x, (C,), w, b, eps=1e-5))
    t_sm = bench(lambda: torch.softmax(x, dim=-1))
    ref_ln = F.layer_norm(x.float(), (C,), w.float(), b.float(), eps=1e-5)
    ref_sm = torch.softmax(x.float(), dim=-1)
    print(f"{R}x{C}: torch ln {moved/t_ln/1e6:.0f} GB/s, softmax {moved/t_sm/1e6:.0f} GB/s", flush=True)
    BC = next_power_of_2(C)
    for name, kern in (("early", L.layer_norm_kernel), ("late", ln_late), ("softmax", S.softmax_kernel)):
        for br in (1, 2, 4):
            for nw in (4, 8, 16, 32):
                if br * BC // (32 * nw) > 128 or br * BC // (32 * nw) < 1:
                    continue
                k = kern.with_options(num_warps=nw)
                if name == "softmax":
                    y = torch.empty_like(x)
                    fn = lambda: k[(cdiv(R, br),)](x, y, R, C, BLOCK_R=br, BLOCK_C=BC)
                    ref = ref_sm
                else:
                    y = torch.empty_like(x)
                    m = torch.empty(R, device="cuda"); r = torch.empty(R, device="cuda")
                    fn = lambda: k[(cdiv(R, br),)](x, w, b, y, m, r, R, C, 1e-5, BLOCK_R=br, BLOCK_C=BC)
                    ref = ref_ln
                try:
                    fn(); torch.cuda.synchronize()
                    err = ((y.float() - ref).abs().max() / ref.abs().max()).item()
                    t = bench(fn)
                except Exception as e:
                    print(f"  {name} r{br} w{nw}: {type(e).__name__} {str(e)[:150]}", flush=True)
                    continue
                tt = t_sm if name == "softmax" else t_ln
                row = dict(shape=[R, C], variant=name, block_r=br, warps=nw, ms=t, gbps=moved / t / 1e6,
                           ratio=tt / t, err=err)
                out["rows"].append(row)
                print(f"  {name:8} r{br} w{nw:2}: {row['gbps']:.0f} GB/s ratio {row['ratio']:.2f} err {err:.1e}", flush=True)
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "sweep_ln.json"), "w"), indent=1)
