"""A toy decoder serving a batch with a paged KV cache (issue 12).

One attention layer with random weights over a tiny vocabulary: the prompts of a batch (of
different lengths) are prefilled together with tessel.attention_varlen (packed, no padding), their
keys and values written into pages handed out in random order, then each decode step appends
one token's keys and values and runs tessel.attention_with_kvcache. Every attention output is
checked against the float64 reference of the same sequence.

    python3 examples/python/decode_paged.py            # numpy: the CPU interpreter
    python3 examples/python/decode_paged.py --cuda     # torch CUDA tensors (fp16) on the GPU
"""
import argparse

from _common import np, placement
import tessel
from tessel.reference import max_rel_error, reference_kvcache, reference_varlen

VOCAB, DM, H, HKV, D, PAGE = 50, 64, 4, 2, 16, 16


class PagedCache:
    """num_pages pages of PAGE rows; each sequence owns a list of pages (a row of the table)."""

    def __init__(self, batch, num_pages, max_pages, rng):
        self.k = np.zeros((num_pages, PAGE, HKV, D), np.float32)
        self.v = np.zeros_like(self.k)
        self.free = list(rng.permutation(num_pages))        # pages in random order
        self.table = np.full((batch, max_pages), -1, np.int32)
        self.lengths = np.zeros(batch, np.int32)

    def append(self, b, k, v):
        """k, v [n, HKV, D]: the next n keys and values of sequence b."""
        for kr, vr in zip(k, v):
            j = self.lengths[b]
            if j % PAGE == 0:
                self.table[b, j // PAGE] = self.free.pop()
            page = self.table[b, j // PAGE]
            self.k[page, j % PAGE], self.v[page, j % PAGE] = kr, vr
            self.lengths[b] += 1


def layer_weights(rng):
    """The toy layer's random weights: the embedding [VOCAB, DM], q/k/v projections and the
    output projection, scaled by their fan-in."""
    emb = rng.standard_normal((VOCAB, DM)).astype(np.float32)
    wq, wk, wv = (rng.standard_normal((DM, n * D)).astype(np.float32) / DM**0.5
                  for n in (H, HKV, HKV))
    wo = rng.standard_normal((H * D, DM)).astype(np.float32) / (H * D)**0.5
    return emb, wq, wk, wv, wo


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cuda", action="store_true", help="run on the GPU (needs torch)")
    ap.add_argument("--steps", type=int, default=6)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    emb, wq, wk, wv, wo = layer_weights(rng)
    dev, dev16, host = placement(args.cuda)

    prompts = [rng.integers(0, VOCAB, n) for n in (3, 21, 9)]
    B = len(prompts)
    cache = PagedCache(B, num_pages=3 * B * 4, max_pages=4, rng=rng)
    worst = 0.0

    # Prefill: every prompt at once, packed.
    tokens = np.concatenate(prompts)
    x = emb[tokens]
    q = (x @ wq).reshape(-1, H, D)
    k = (x @ wk).reshape(-1, HKV, D)
    v = (x @ wv).reshape(-1, HKV, D)
    cu = np.concatenate([[0], np.cumsum([len(p) for p in prompts])]).astype(np.int32)
    o = host(tessel.attention_varlen(dev16(q), dev16(k), dev16(v), dev(cu), dev(cu),
                                     max(map(len, prompts)), max(map(len, prompts)),
                                     causal=True))
    worst = max(worst, max_rel_error(o, reference_varlen(q, k, v, cu, cu, causal=True)[0]))
    for b in range(B):
        cache.append(b, k[cu[b]:cu[b + 1]], v[cu[b]:cu[b + 1]])
    last = o[cu[1:] - 1].reshape(B, H * D)
    generated = [[int(t) for t in p] for p in prompts]

    # Decode: one token per sequence and step.
    for _ in range(args.steps):
        nxt = np.argmax((last @ wo) @ emb.T, axis=1)
        x = emb[nxt]
        q = (x @ wq).reshape(B, 1, H, D)
        for b in range(B):
            cache.append(b, (x[b] @ wk).reshape(1, HKV, D), (x[b] @ wv).reshape(1, HKV, D))
            generated[b].append(int(nxt[b]))
        o = host(tessel.attention_with_kvcache(dev16(q), dev16(cache.k), dev16(cache.v),
                                               dev(cache.lengths), block_table=dev(cache.table),
                                               causal=True))
        ref, _ = reference_kvcache(q, cache.k, cache.v, cache.lengths, cache.table, causal=True)
        worst = max(worst, max_rel_error(o, ref))
        last = o.reshape(B, H * D)

    for b, seq in enumerate(generated):
        print(f"sequence {b}: prompt {seq[:len(prompts[b])]} -> {seq[len(prompts[b]):]}")
    print(f"pages used {3 * B * 4 - len(cache.free)}, table\n{cache.table}")
    print(f"decode_paged: max error vs float64 numpy = {worst:.2e}")
    assert worst < (2e-2 if args.cuda else 1e-4), worst


if __name__ == "__main__":
    main()
