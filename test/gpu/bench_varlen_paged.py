"""A serving engine's batch against a paged KV cache: attention_varlen(block_table=) (one launch
for decode steps and prefill chunks together) beside the routes there were before it —
attention_with_kvcache for the decode steps (split-KV, GQA packing) plus attention_varlen over
the prefill chunks' packed keys — one process, fp16.

    PYTHONPATH=build/python python3 test/gpu/bench_varlen_paged.py [--json OUT.json]

Cases (H 32, Hkv 8, d128, pages of 16; K keys a sequence): `decode` 64 sequences of one query;
`mixed` 60 decode steps and 4 prefill chunks of 512 queries; `prefill` 8 chunks of 1024; `spec`
64 sequences of 5 queries (speculative decoding); `chunk` one chunk of 2048 beside 127 decode
steps (chunked prefill). Timed per call (output allocation and the
Python launch path included): ms of the one call in varlen_cache_kernel, ms of the call with
decode steps or a few queries a sequence by the split-KV program
(varlen_cache.PACK_DECODE_ROWS_CUDA, FEW_QUERIES_PACKED_CUDA), ms of the
split calls (the decode rows' attention_with_kvcache, then the chunks' own varlen call; the
index copies that split them are made before timing), and the bandwidth of the cache read once
(bytes of K and V of every sequence / time) for the decode rows. `--blocks 128x32 ...`: the one
call also timed with those blocks (block_m, block_n: varlen_cache_kernel's, for the chunks),
printed as its ratio to the default and the largest difference of its output; `--tiles` the
default call on the other varlen grid (serving_checks.VARLEN_TILES_CUDA flipped). Without torch
or CUDA it prints why and exits 0.
"""
import argparse

import numpy as np

from bench_decode import cuda_torch, make_timer, save_report


def batch(torch, nq, K, H=32, Hkv=8, D=128, page=16):
    pages_each = -(-K // page)
    B = len(nq)
    table = torch.randperm(B * pages_each + 7, device="cuda")[:B * pages_each]
    table = table.view(B, pages_each).to(torch.int32)
    kc, vc = (torch.randn(B * pages_each + 7, page, Hkv, D, device="cuda").half()
              for _ in range(2))
    cu_q = torch.tensor(np.concatenate([[0], np.cumsum(nq)]), dtype=torch.int32, device="cuda")
    q = torch.randn(sum(nq), H, D, device="cuda").half()
    used = torch.full((B,), K, dtype=torch.int32, device="cuda")
    return q, kc, vc, cu_q, table, used


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--keys", type=int, nargs="+", default=[1024, 4096, 16384])
    ap.add_argument("--cases", nargs="+", default=["decode", "mixed", "prefill", "spec"])
    ap.add_argument("--blocks", nargs="*", default=[],
                    help="also time the one call with these MxN blocks (e.g. 128x32)")
    ap.add_argument("--tiles", action="store_true",
                    help="also time the default call on the other varlen grid "
                         "(serving_checks.VARLEN_TILES_CUDA flipped)")
    args = ap.parse_args()
    blocks = [tuple(int(n) for n in b.split("x")) for b in args.blocks]
    torch = cuda_torch("bench_varlen_paged")
    if torch is None:
        return
    import tessel
    from tessel import serving_checks, varlen_cache
    timed, how = make_timer(torch)
    cases = {"decode": [1] * 64, "mixed": [1] * 60 + [512] * 4, "prefill": [1024] * 8,
             "spec": [5] * 64, "chunk": [2048] + [1] * 127}
    cases = {name: cases[name] for name in args.cases}
    rows = []
    print(f"timing: {how}")
    print(f"{'case':8} {'K':>6} {'varlen ms':>10} {'packed ms':>10} {'split ms':>9} "
          f"{'split/varlen':>12} {'varlen/packed':>13}")
    for K in args.keys:
        for name, nq in cases.items():
            q, kc, vc, cu_q, table, used = batch(torch, nq, K)
            one = lambda: tessel.attention_varlen(  # noqa: E731
                q, kc, vc, cu_q, None, max(nq), K, causal=True, block_table=table,
                seqused_k=used)
            switches = ("PACK_DECODE_ROWS_CUDA", "FEW_QUERIES_PACKED_CUDA")
            saved = [getattr(varlen_cache, n) for n in switches]
            for n in switches:
                setattr(varlen_cache, n, False)
            t_varlen = timed(one)
            for n in switches:
                setattr(varlen_cache, n, True)
            t_packed = timed(one)
            for n, x in zip(switches, saved):
                setattr(varlen_cache, n, x)
            # Before: the decode steps through attention_with_kvcache ([B, 1, H, D]), the
            # prompt chunks through a varlen call of their own (what a caller would split).
            dec = [b for b, n in enumerate(nq) if n == 1]
            pre = [b for b, n in enumerate(nq) if n > 1]
            starts = np.concatenate([[0], np.cumsum(nq)])
            if dec:
                first = torch.tensor([int(starts[b]) for b in dec], device="cuda")
                qd = q[first].view(len(dec), 1, q.shape[1], q.shape[2])
                used_dec, table_dec = used[dec].contiguous(), table[dec].contiguous()
            if pre:
                cu_pre = torch.tensor(np.concatenate([[0], np.cumsum([nq[b] for b in pre])]),
                                      dtype=torch.int32, device="cuda")
                q_pre = torch.cat([q[int(starts[b]):int(starts[b + 1])] for b in pre])
                used_pre, table_pre = used[pre].contiguous(), table[pre].contiguous()

            def split_calls():
                if dec:
                    tessel.attention_with_kvcache(qd, kc, vc, used_dec, block_table=table_dec,
                                                  causal=True)
                if pre:
                    tessel.attention_varlen(q_pre, kc, vc, cu_pre, None, max(nq), K,
                                            causal=True, block_table=table_pre,
                                            seqused_k=used_pre)
            t_split = timed(split_calls)
            cache_bytes = 2 * K * kc.shape[2] * kc.shape[3] * 2 * len(dec)
            rows.append(dict(case=name, keys=K, varlen_ms=t_varlen, packed_ms=t_packed,
                             split_ms=t_split,
                             decode_gbs=cache_bytes / (t_varlen * 1e6) if dec else None))
            print(f"{name:8} {K:6} {t_varlen:10.3f} {t_packed:10.3f} {t_split:9.3f} "
                  f"{t_split / t_varlen:12.2f} {t_varlen / t_packed:13.2f}", flush=True)
            mine = one()
            if args.tiles:
                t_default = timed(one)
                was = serving_checks.VARLEN_TILES_CUDA
                serving_checks.VARLEN_TILES_CUDA = not was
                diff = ((one().float() - mine.float()).abs().max()
                        / mine.float().abs().max()).item()
                ms = timed(one)
                serving_checks.VARLEN_TILES_CUDA = was
                rows[-1].update({"ms_default": t_default,
                                 "ms_tiles_" + ("off" if was else "on"): ms})
                print(f"{'':8} VARLEN_TILES_CUDA={not was}: {ms:.3f} ms, "
                      f"{t_default / ms:.3f}x the default ({t_default:.3f}), diff {diff:.2e}",
                      flush=True)
            for bm, bn in blocks:
                other = lambda: tessel.attention_varlen(  # noqa: E731
                    q, kc, vc, cu_q, None, max(nq), K, causal=True, block_table=table,
                    seqused_k=used, block_m=bm, block_n=bn)
                diff = ((other().float() - mine.float()).abs().max()
                        / mine.float().abs().max()).item()
                ms = timed(other)
                rows[-1][f"ms_{bm}x{bn}"] = ms
                print(f"{'':8} {bm}x{bn}: {ms:.3f} ms, {t_packed / ms:.3f}x the default, "
                      f"diff {diff:.2e}", flush=True)
    save_report(args.json, {"timing": how, "rows": rows})


if __name__ == "__main__":
    main()
