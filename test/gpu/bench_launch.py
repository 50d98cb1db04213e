"""Launch overhead and cold compile time of the DSL on the GPU.

    python3 test/gpu/bench_launch.py [--json OUT.json] [--n 1000]
    python3 test/gpu/bench_launch.py --fake-driver [--n 20000]    # no GPU, no torch needed

--fake-driver loads the no-op driver of test/FakeCuda (TESSEL_LIBCUDA) and a stand-in torch
module (test/python/fakecuda.py): every row then measures tessel's host cost above
cuLaunchKernel (the driver row is ~0), on any machine. sdpa, triton and the cold compile are
skipped there; "attention" allocates fake tensors (Python objects), not torch memory.

Host time per launch on a cache hit (median and p90 of N single launches timed with
time.perf_counter_ns, after warm-up; the GPU work is tiny so the launch queue never fills):

- trivial:       scale_shift[grid](x, y, n, a, b, BLOCK=256) on CUDA tensors (the whole DSL path);
- trivial-raw:   the C++ Launcher.launch builtin called directly (no key, no lookup);
- trivial-nochk: the same with the per-pointer driver check off;
- driver:        cuLaunchKernel alone, arguments packed once (Launcher.time_driver): the floor;
- attention-kernel: attention_kernel[grid](...) with preallocated outputs (d128, fp16, causal);
- attention:     tessel.attention(q, k, v, causal=True) (+ output and LSE allocation);
- sdpa:          torch.nn.functional.scaled_dot_product_attention on the same inputs, for scale;
- triton:        a trivial @triton.jit kernel launch, when triton is installed;
- noop:          an empty Python lambda, the cost of the timing loop itself (in every row).

Cold compile: a fresh process with an empty TESSEL_CACHE_DIR runs tessel.attention once
(trace + tile pipeline + GPU compile + ptxas + load + launch, synchronised), for d128 and d64;
then a fresh process on the filled cache (disk hit).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

# test/python: fakecuda and the launch-path kernels (launch_kernels.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
FAKE = "--fake-driver" in sys.argv
if FAKE:
    import fakecuda
    DRIVER = fakecuda.install()
    torch = fakecuda.fake_torch(DRIVER)
    torch.cuda = type("cuda", (), {"synchronize": staticmethod(lambda: None),
                                   "get_device_name": staticmethod(lambda i: "fake driver")})
    torch.__version__ = "fake"

    def randn(*shape, device="cuda", dtype=None):
        return torch.Tensor(shape, dtype or torch.float32, "cuda:0")
else:
    import torch
    randn = torch.randn

import tessel  # noqa: E402
from tessel.attention import attention_kernel  # noqa: E402

from launch_kernels import scale_shift  # noqa: E402


def time_calls(fn, n, warmup=50):
    if FAKE and "--per-call" not in sys.argv:
        return time_batches(fn, n, warmup)
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    clock = time.perf_counter_ns
    for i in range(n):
        t0 = clock()
        fn()
        times.append(clock() - t0)
        if i % 200 == 199:
            torch.cuda.synchronize()      # outside the timed region: keep the queue short
    torch.cuda.synchronize()
    times.sort()
    return {"median_us": times[len(times) // 2] / 1e3, "p90_us": times[int(len(times) * 0.9)] / 1e3,
            "min_us": times[0] / 1e3, "mean_us": statistics.fmean(times) / 1e3, "n": n}


def time_batches(fn, n, warmup, batch=500):
    """--fake-driver: the mean of batches of `batch` calls (no clock read per call, which costs
    ~50 ns here); median and min over n // batch batches (the min resists other processes)."""
    for _ in range(warmup):
        fn()
    clock = time.perf_counter_ns
    means = []
    calls = range(batch)
    for _ in range(max(3, n // batch)):
        t0 = clock()
        for _ in calls:
            fn()
        means.append((clock() - t0) / batch)
    means.sort()
    return {"median_us": means[len(means) // 2] / 1e3, "p90_us": means[int(len(means) * 0.9)] / 1e3,
            "min_us": means[0] / 1e3, "mean_us": statistics.fmean(means) / 1e3, "n": n,
            "batch": batch}


COLD = textwrap.dedent("""
    import json, sys, time
    import torch
    t0 = time.perf_counter()
    import tessel
    t1 = time.perf_counter()
    D = int(sys.argv[1])
    q = torch.randn(1, 8, 1024, D, device="cuda", dtype=torch.float16)
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    o = tessel.attention(q, q, q, causal=True)
    torch.cuda.synchronize()
    t3 = time.perf_counter()
    o = tessel.attention(q, q, q, causal=True)
    torch.cuda.synchronize()
    t4 = time.perf_counter()
    print(json.dumps({"import_tessel_s": t1 - t0, "first_call_s": t3 - t2,
                      "second_call_s": t4 - t3}))
""")


def cold_compile(D, cache_dir):
    env = dict(os.environ, TESSEL_CACHE_DIR=cache_dir)
    r = subprocess.run([sys.executable, "-c", COLD, str(D)], capture_output=True, text=True,
                       env=env, timeout=300)
    if r.returncode != 0:
        return {"error": r.stderr[-2000:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--fake-driver", action="store_true",
                    help="the no-op driver of test/FakeCuda and a stand-in torch (no GPU)")
    ap.add_argument("--per-call", action="store_true",
                    help="with --fake-driver: time each call as on the GPU (not batches)")
    opts = ap.parse_args()
    n = opts.n
    results = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "n": n,
               "fake_driver": FAKE}

    results["noop"] = time_calls(lambda: None, n)
    x = randn(1024, device="cuda")
    y = torch.empty_like(x)
    grid = (4,)
    results["trivial"] = time_calls(lambda: scale_shift[grid](x, y, 1024, 2.0, 1.0, BLOCK=256), n)
    torch.cuda.synchronize()
    if FAKE:
        assert DRIVER.launches() >= n
    else:
        assert torch.allclose(y, x * 2.0 + 1.0)
    kernel = scale_shift.warmup(x, y, 1024, 2.0, 1.0, BLOCK=256)
    launcher = kernel.gpu_launcher(0)
    launch = launcher.launch
    stream = 0 if FAKE else torch.cuda.current_stream().cuda_stream
    results["trivial-raw"] = time_calls(lambda: launch(grid, stream, x, y, 1024, 2.0, 1.0), n)
    launcher.check_pointers = False
    results["trivial-nochk"] = time_calls(lambda: launch(grid, stream, x, y, 1024, 2.0, 1.0), n)
    launcher.check_pointers = True
    results["driver"] = {"median_us": min(
        launcher.time_driver(n, grid, stream, 0, x, y, 1024, 2.0, 1.0) for _ in range(3)) / 1e3}

    B, H, N, D = 1, 2, 128, 128
    q, k, v = (randn(B, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    o = torch.empty_like(q)
    lse = torch.empty((B, H, N), device="cuda")
    scale = D ** -0.5
    agrid = (1, B * H)
    results["attention-kernel"] = time_calls(
        lambda: attention_kernel[agrid](q, k, v, o, lse, N, N, H, H, scale, D=D, BLOCK_M=128,
                                        BLOCK_N=64, CAUSAL=True, SCORE_MOD=None, MASK_MOD=None), n)
    results["attention"] = time_calls(lambda: tessel.attention(q, k, v, causal=True), n)
    if FAKE:
        finish(results, opts)
        return
    f = torch.nn.functional.scaled_dot_product_attention
    results["sdpa"] = time_calls(lambda: f(q, k, v, is_causal=True), n)

    try:
        import triton
        import triton.language as ttl

        @triton.jit
        def tri_scale_shift(x_ptr, y_ptr, n, a, b, BLOCK: ttl.constexpr):
            offs = ttl.program_id(0) * BLOCK + ttl.arange(0, BLOCK)
            m = offs < n
            ttl.store(y_ptr + offs, ttl.load(x_ptr + offs, mask=m) * a + b, mask=m)

        results["triton"] = time_calls(
            lambda: tri_scale_shift[grid](x, y, 1024, 2.0, 1.0, BLOCK=256), n)
        results["triton"]["version"] = triton.__version__
    except Exception as e:  # noqa: BLE001
        results["triton"] = {"error": str(e)[:300]}

    with tempfile.TemporaryDirectory() as d128, tempfile.TemporaryDirectory() as d64:
        results["cold_d128"] = cold_compile(128, d128)
        results["warm_disk_d128"] = cold_compile(128, d128)
        results["cold_d64"] = cold_compile(64, d64)
    finish(results, opts)


def finish(results, opts):
    if FAKE:
        print("fake driver: host time per call; 'above' = median - noop (the timing loop) - the "
              "fake driver")
    print(f"{'what':<18} {'median us':>10} {'p90 us':>8}" + (f" {'min us':>8} {'above':>8}" if FAKE else ""))
    for key in ("trivial", "trivial-raw", "trivial-nochk", "driver", "attention-kernel",
                "attention", "sdpa", "triton", "noop"):
        if key not in results:
            continue
        r = results.get(key, {})
        if "median_us" in r:
            line = f"{key:<18} {r['median_us']:>10.2f} {r.get('p90_us', float('nan')):>8.2f}"
            if FAKE and "min_us" in r:
                floor = results["noop"]["median_us"] + results["driver"]["median_us"]
                line += f" {r['min_us']:>8.2f} {r['median_us'] - floor:>8.2f}"
            print(line)
        else:
            print(f"{key:<18} {r}")
    if "median_us" in results.get("trivial", {}) and "median_us" in results.get("driver", {}):
        drv = results["driver"]["median_us"]
        above = {k: results[k]["median_us"] - drv for k in ("trivial", "attention-kernel")
                 if "median_us" in results.get(k, {})}
        results["above_driver_us"] = above
        print("above cuLaunchKernel (row - driver; goal < 1 us, trivial < 5 us in all): " +
              ", ".join(f"{k} {v:.2f} us" for k, v in above.items()))
    for key in ("cold_d128", "warm_disk_d128", "cold_d64"):
        if key not in results:
            continue
        r = results[key]
        if "first_call_s" in r:
            print(f"{key:<18} first call {r['first_call_s']:.3f} s, then {r['second_call_s']*1e3:.2f} ms"
                  f" (import tessel {r['import_tessel_s']:.3f} s)")
        else:
            print(key, r)
    if opts.json:
        with open(opts.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
