"""Continuous batching with chunked prefill against a paged KV cache: each step serves one
mixed batch — prompt chunks of sequences still prefilling beside one token of sequences
already decoding — in one tessel.attention_varlen call (block_table=, seqused_k=), as a serving
engine does with FlashAttention's flash_attn_varlen_func.

One attention layer with random weights over a tiny vocabulary (decode_paged.py's); prompts of
different lengths are prefilled CHUNK tokens a step; every step's output is checked against
the float64 reference of each sequence over its keys in the cache.

    python3 examples/python/serve_chunked.py            # numpy: the CPU interpreter
    python3 examples/python/serve_chunked.py --cuda     # torch CUDA tensors (fp16)
"""
import argparse

from _common import np, placement
from decode_paged import HKV, D, VOCAB, H, PagedCache, layer_weights
import tessel
from tessel.reference import max_rel_error, reference_kvcache

CHUNK = 16


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cuda", action="store_true", help="run on the GPU (needs torch)")
    ap.add_argument("--new-tokens", type=int, default=4)
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    emb, wq, wk, wv, wo = layer_weights(rng)
    dev, dev16, host = placement(args.cuda)

    prompts = [list(rng.integers(0, VOCAB, n)) for n in (40, 7, 25)]
    B = len(prompts)
    cache = PagedCache(B, num_pages=B * 6, max_pages=6, rng=rng)
    pending = [list(p) for p in prompts]  # tokens to feed: the prompt's rest, then one decoded
    generated = [[] for _ in range(B)]
    worst, steps = 0.0, 0
    while any(len(g) < args.new_tokens for g in generated):
        batch = [b for b in range(B) if pending[b] and len(generated[b]) < args.new_tokens]
        feed = {b: pending[b][:CHUNK] for b in batch}
        x = {b: emb[np.array(t)] for b, t in feed.items()}
        for b in batch:                  # the new tokens' keys and values into the pages
            cache.append(b, (x[b] @ wk).reshape(-1, HKV, D), (x[b] @ wv).reshape(-1, HKV, D))
        q = {b: (x[b] @ wq).reshape(-1, H, D) for b in batch}
        nq = [len(feed[b]) for b in batch]
        cu_q = np.concatenate([[0], np.cumsum(nq)]).astype(np.int32)
        q_packed = np.concatenate([q[b] for b in batch])
        o = host(tessel.attention_varlen(
            dev16(q_packed), dev16(cache.k), dev16(cache.v), dev(cu_q), None, max(nq),
            int(cache.lengths[batch].max()), causal=True, block_table=dev(cache.table[batch]),
            seqused_k=dev(cache.lengths[batch])))
        for i, b in enumerate(batch):
            ref, _ = reference_kvcache(q[b][None], cache.k, cache.v, cache.lengths[[b]],
                                       cache.table[[b]], causal=True)
            worst = max(worst, max_rel_error(o[cu_q[i]:cu_q[i + 1]], ref[0]))
            pending[b] = pending[b][nq[i]:]
            if not pending[b]:           # prompt (or last token) consumed: the next token
                token = int(np.argmax((o[cu_q[i + 1] - 1].reshape(-1) @ wo) @ emb.T))
                generated[b].append(token)
                pending[b] = [token]
        steps += 1
        print(f"step {steps}: queries per sequence {dict(zip(batch, nq))}")
    for b in range(B):
        print(f"sequence {b}: prompt of {len(prompts[b])} -> {generated[b]}")
    print(f"serve_chunked: {steps} steps, max error vs float64 numpy = {worst:.2e}")
    assert worst < (2e-2 if args.cuda else 1e-4), worst


if __name__ == "__main__":
    main()
