"""The block-sparse backward at head dim D (256 by default), its dK/dV program split
(SPLIT_KEYROWS: d256's default since the thirty-ninth session, a candidate at d128) against one
program (SPLIT_KEYROWS = ()), the dK program on 32-row query blocks (KEYROWS_DK_BLOCK_M)
and the dQ program on 32-key blocks (FAST_DQ_BLOCKS_SM90) —
one process, configurations alternated over rounds, triton.testing.do_bench medians of
tessel.attention_backward with a block mask (a causal document mask of 4 documents). Prints ms
per configuration and the ratio to `one`.

    PYTHONPATH=... python3 sparse_bwd.py [--d 256] [--n 4096 8192] [--rounds 2]
"""
import argparse
import statistics
import sys

sys.path.insert(0, "test/gpu")
from bench_decode import make_timer  # noqa: E402

import torch  # noqa: E402

import tessel  # noqa: E402
import tessel.backward as bw  # noqa: E402


def configs(D):
    dq = dict(bw.FAST_DQ_BLOCKS_SM90)
    return {"one": dict(SPLIT_KEYROWS=(), KEYROWS_DK_BLOCK_M={}, FAST_DQ_BLOCKS_SM90=dq),
            "split": dict(SPLIT_KEYROWS=(D,), KEYROWS_DK_BLOCK_M={}, FAST_DQ_BLOCKS_SM90=dq),
            "split-dk32": dict(SPLIT_KEYROWS=(D,), KEYROWS_DK_BLOCK_M={D: 32},
                               FAST_DQ_BLOCKS_SM90=dq),
            "split-dk32-dq32": dict(SPLIT_KEYROWS=(D,), KEYROWS_DK_BLOCK_M={D: 32},
                                    FAST_DQ_BLOCKS_SM90={**dq, D: (64, 32)})}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, nargs="+", default=[4096, 8192])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--d", type=int, default=256)
    args = ap.parse_args()
    CONFIGS = configs(args.d)
    timed, how = make_timer(torch)
    print(f"{torch.cuda.get_device_name()}; {how}")
    D, H = args.d, 2048 // args.d
    for n in args.n:
        B = max(1, 16384 // n)
        doc = (torch.arange(n, device="cuda") * 4 // n).to(torch.int32).expand(B, n).contiguous()

        def mask(b, h, q_idx, kv_idx):
            return (doc[b, q_idx] == doc[b, kv_idx]) & (q_idx >= kv_idx)
        bm = tessel.block_mask(mask, B, None, n, n, device="cuda")
        gen = torch.Generator(device="cuda").manual_seed(n)
        q, k, v, do = (torch.randn(B, H, n, D, device="cuda", generator=gen, dtype=torch.float16)
                       for _ in range(4))
        o, lse = tessel.attention(q, k, v, mask_mod=mask, block_mask=bm, return_lse=True)
        times = {name: [] for name in CONFIGS}
        grads = {}
        for _ in range(args.rounds):
            for name, fields in CONFIGS.items():
                for field, value in fields.items():
                    setattr(bw, field, value)

                def call():
                    return tessel.attention_backward(q, k, v, o, lse, do, mask_mod=mask,
                                                     block_mask=bm)
                grads[name] = call()
                times[name].append(timed(call))
        base = statistics.median(times["one"])
        for name in CONFIGS:
            diff = max((g - w).abs().max().item() for g, w in zip(grads[name], grads["one"]))
            ms = statistics.median(times[name])
            print(f"d{D} n={n} B={B} {name:>11}: {ms:8.3f} ms  one/this {base / ms:5.3f}  "
                  f"max |grad - one's| {diff:.3g}")


if __name__ == "__main__":
    main()
