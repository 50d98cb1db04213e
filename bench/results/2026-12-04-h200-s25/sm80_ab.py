"""A/B of the sm_80 d128 defaults on the H200 (sm_80 cubins on an sm_90 device: a proxy for an
A100, which no session has). One configuration a process:

    python3 sm80_ab.py default|two_stages|mods_128x64|mods_128x32 [--json OUT]

default: tessel.attention's sm_80 choices (d128 plain 128x64 with three stages, GPU_STAGES; with
a mod 64x64, GPU_BLOCKS_MODS). two_stages: GPU_STAGES emptied (the plain kernels' ring as
before). mods_128x64 / mods_128x32: the mods cases at those blocks (128x64 as before). fp16, b·n = 16k tokens, h·d = 2048,
triton.testing.do_bench median of a whole call."""
import importlib
import json
import sys

import torch

sys.path.insert(0, "test/gpu")
from bench_decode import make_timer  # noqa: E402

import tessel  # noqa: E402
import tessel.language as tl  # noqa: E402

att = importlib.import_module("tessel.attention")


def softcap(score, b, h, q_idx, kv_idx):
    return 30.0 * tl.tanh(score / 30.0)


def window(b, h, q_idx, kv_idx):
    return q_idx - kv_idx < 1024


def main():
    config = sys.argv[1]
    tessel.gpu.chip_of(0)
    tessel.gpu._chips[0] = "sm_80"
    if config == "two_stages":
        att.GPU_STAGES.clear()
    timed, timer = make_timer(torch)
    rows = []
    for n in (1024, 4096, 16384):
        B, H, D = 16384 // n, 16, 128
        q, k, v = (torch.randn(B, H, n, D, device="cuda", dtype=torch.float16) for _ in range(3))
        for case, kw in (("full", {}), ("causal", dict(causal=True)),
                         ("softcap causal", dict(causal=True, score_mod=softcap)),
                         ("window", dict(mask_mod=window))):
            mods = "score_mod" in kw or "mask_mod" in kw
            if config.startswith("mods_") and not mods or config == "two_stages" and mods:
                continue
            if config.startswith("mods_"):
                bm, bn = map(int, config[5:].split("x"))
                kw = dict(kw, block_m=bm, block_n=bn)
            ms = timed(lambda: tessel.attention(q, k, v, **kw))
            rows.append(dict(config=config, n=n, case=case, ms=ms))
            print(f"{config:>12} n={n:>6} {case:>15} {ms:.3f} ms", flush=True)
    if "--json" in sys.argv:
        json.dump(dict(timer=timer, device=torch.cuda.get_device_name(0), rows=rows),
                  open(sys.argv[sys.argv.index("--json") + 1], "w"), indent=1)


if __name__ == "__main__":
    main()
