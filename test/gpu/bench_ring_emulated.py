"""The compute of every rank of a W-rank ring, on one GPU, rank after rank (issue 17).

    python3 test/gpu/bench_ring_emulated.py [--n 65536 262144] [--worlds 2 4 8] [--json F]

Runs tessel.distributed's own forward loop (`_forward`) for each rank r of a ring of W ranks with
the transfers replaced by handing over the next shard at once (`EmulatedRing`): what each rank
computes — tessel.attention on its shard pairs and the merges — timed on this GPU. With perfect
overlap a real ring takes the slowest rank's time, so t_1 / (W · max_r t_r) is the scaling
efficiency the compute allows (before communication), for contiguous and zigzag shards of a
causal sequence; t_1 is tessel.attention on the whole sequence. Also the merges' share.
"""
import argparse
import json

import torch

import tessel
from bench_decode import save_report, time_back_to_back
from tessel import distributed as td
from tessel.distributed import contiguous_shard, zigzag_shard


class EmulatedRing(td._Ring):
    """Rank `rank` of a ring of `world`, with every shard on this GPU: exchange() returns the
    shard the next step would receive, at once."""

    def __init__(self, rank, world, kv_shards, layout, causal):
        self.torch = torch
        self.rank, self.world = rank, world
        self.kv_shards = kv_shards
        self.q_lens = self.kv_lens = [s.shape[3] for s in kv_shards]
        self.fronts = None
        if layout == "zigzag" and causal:
            self.fronts = td.split_sizes(sum(self.q_lens), 2 * world)[:world]
        self.step = 0

    def exchange(self, send, recv_shape, tag):
        self.step += 1
        return self.kv_shards[self.source(self.step)], None


def timed(fn, reps=3):
    return time_back_to_back(torch, fn, reps)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, nargs="+", default=[65536])
    ap.add_argument("--worlds", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--json")
    args = ap.parse_args()
    B, H, D, dtype = 1, args.heads, 128, torch.float16
    rows = []
    for N in args.n:
        q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=dtype) for _ in range(3))
        t1 = timed(lambda: tessel.attention(q, k, v, causal=True))
        for world in args.worlds:
            for layout in ("contiguous", "zigzag"):
                cut = zigzag_shard if layout == "zigzag" else contiguous_shard
                qs = [cut(q, r, world).contiguous() for r in range(world)]
                kvs = [torch.stack((cut(k, r, world), cut(v, r, world))) for r in range(world)]
                per_rank = []
                for r in range(world):
                    def one_rank(r=r):
                        ring = EmulatedRing(r, world, kvs, layout, True)
                        td._forward(ring, qs[r], kvs[r][0], kvs[r][1], True, D ** -0.5, False)
                    per_rank.append(timed(one_rank))
                acc = torch.zeros(B, H, qs[0].shape[2], D, device="cuda")
                lse = torch.zeros(B, H, qs[0].shape[2], device="cuda")
                o_part = torch.zeros_like(qs[0])
                t_merge = timed(lambda: td._merge(acc, lse, o_part, lse, 0))
                row = {"N": N, "world": world, "layout": layout, "ms_one_gpu": round(t1, 3),
                       "ms_per_rank": [round(t, 3) for t in per_rank],
                       "efficiency": round(t1 / (world * max(per_rank)), 3),
                       "ms_merge_per_step": round(t_merge, 3),
                       "merge_share": round(t_merge * (world - 1) / max(per_rank), 3)}
                rows.append(row)
                print(json.dumps(row), flush=True)
                del qs, kvs
        del q, k, v
        torch.cuda.empty_cache()
    save_report(args.json, {"device": torch.cuda.get_device_name(), "rows": rows})


if __name__ == "__main__":
    main()
