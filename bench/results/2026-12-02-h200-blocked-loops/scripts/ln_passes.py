"""Layer norm in passes (examples/python/layer_norm.py, layer_norm_chunked_kernel: loops over
column chunks) beside the autotuned one-block kernel and torch, in GB/s of x read and y written
(do_bench median, fp16); JSON to $OUT/ln_passes.json.

    OUT=. python3 ln_passes.py      # tessel importable (PYTHONPATH)
"""
import json, os, pathlib, sys
ROOT = pathlib.Path(__file__).resolve().parents[4]
sys.path[:0] = [str(ROOT / "examples" / "python"), str(ROOT / "test" / "gpu")]
import torch
import layer_norm as L
from bench_decode import make_timer, warm_up

timed, _ = make_timer(torch)          # do_bench median
warm_up(torch)
rows = []
for R, C in ((4096, 10000), (4096, 8192), (1024, 65536), (32768, 1024)):
    x = torch.randn(R, C, device="cuda", dtype=torch.float16)
    w = torch.randn(C, device="cuda", dtype=torch.float16)
    b = torch.randn(C, device="cuda", dtype=torch.float16)
    moved = 2.0 * R * C * 2
    ref = torch.nn.functional.layer_norm(x.float(), (C,), w.float(), b.float(), eps=1e-5)
    cands = [("torch", lambda: torch.nn.functional.layer_norm(x, (C,), w, b, eps=1e-5)),
             ("one block, tuned", lambda: L.layer_norm(x, w, b)[0])]
    for chunk in (1024, 2048, 4096):
        for br in (1, 2):
            if chunk <= C:
                cands.append((f"passes of {chunk}, {br} rows",
                              lambda chunk=chunk, br=br: L.layer_norm(x, w, b, block_r=br,
                                                                      chunk=chunk)[0]))
    for name, f in cands:
        try:
            err = ((f().float() - ref).abs().max() / ref.abs().max()).item()
            ms = timed(f)
            row = dict(shape=[R, C], variant=name, ms=ms, gbps=moved / ms / 1e6, err=err)
        except Exception as e:  # noqa: BLE001
            row = dict(shape=[R, C], variant=name, error=str(e).splitlines()[0][:200])
        rows.append(row)
        print(f"{R}x{C} {name:>24}: {row.get('gbps', 0):8,.0f} GB/s {row.get('err', '')}",
              flush=True)
json.dump(dict(device=torch.cuda.get_device_name(0), rows=rows),
          open(os.path.join(os.environ.get("OUT", "."), "ln_passes.json"), "w"), indent=1)
