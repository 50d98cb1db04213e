import sys, json, pathlib, os
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"))
import torch, tessel, gemm
from tessel import gpu as tgpu
from triton.testing import do_bench
out = {}
def cdiv(a, b): return (a + b - 1) // b
def run(M, N, K, BM, BN, BK, st, cg, act="", dt=torch.float16, G=8):
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=dt, generator=g)
    b = torch.randn(K, N, device="cuda", dtype=dt, generator=g)
    c = torch.empty(M, N, device="cuda", dtype=dt)
    bias = torch.randn(N, device="cuda", dtype=torch.float32, generator=g)
    k, args = gemm.matmul_kernel.specialize(a, b, c, bias, M, N, K, BM=BM, BN=BN, BK=BK, HAS_BIAS=bool(act), ACTIVATION=act, GROUP_M=G)
    L = k.gpu_launcher(0, tessel.GpuOptions(chip="sm_90a", codegen=cg, num_stages=st))
    grid = (cdiv(M, BM) * cdiv(N, BN),)
    def call():
        cc = torch.empty(M, N, device="cuda", dtype=dt)
        L.launch(grid, tgpu.stream_source(), a, b, cc, bias, M)
        return cc
    cc = call(); torch.cuda.synchronize()
    ref = a.double() @ b.double()
    if act: ref = torch.relu(ref + bias.double())
    err = ((cc.double() - ref).abs().max() / ref.abs().max()).item()
    tref = (a @ b) if not act else torch.relu(a @ b + bias)
    terr = ((tref.double() - ref).abs().max() / ref.abs().max()).item()
    ms = do_bench(call, rep=200)
    tms = do_bench(lambda: (a @ b) if not act else torch.relu(torch.addmm(bias.to(dt), a, b)), rep=200)
    tf = 2 * M * N * K / ms / 1e9; ttf = 2 * M * N * K / tms / 1e9
    row = dict(group=G, shape=[M, N, K], blocks=[BM, BN, BK], stages=st, codegen=cg, act=act, err=err, torch_err=terr, tflops=tf, torch_tflops=ttf, ratio=tf / ttf)
    print(json.dumps(row), flush=True)
    out.setdefault("rows", []).append(row)
for shape, cfgs in [((4096,4096,4096), [(128,128,64,3),(128,256,64,4),(128,128,64,4),(128,256,64,3),(64,256,64,4)]),
                    ((8192,8192,1024), [(128,128,64,3),(128,256,64,4),(128,128,64,4)]),
                    ((16,8192,8192), [(64,128,64,4),(64,64,64,4),(128,128,64,4),(64,128,64,3)]),
                    ((1000,1000,1000), [(128,128,64,3),(128,128,64,4),(64,128,64,3),(64,64,64,3)])]:
    for (BM,BN,BK,st) in cfgs:
        for G in (1, 8):
            try: run(*shape, BM, BN, BK, st, "wgmma", G=G)
            except Exception as e: print("ERR", shape, BM, BN, BK, st, str(e)[:300], flush=True)
run(1000, 1000, 1000, 128, 128, 64, 3, "wgmma", act="relu")
run(1000, 1000, 1000, 128, 128, 64, 4, "wgmma", act="relu", dt=torch.bfloat16)
json.dump(out, open(os.environ.get("OUT", "/tmp") + "/scratch_gemm.json", "w"))
