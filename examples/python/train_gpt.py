"""Training with tessel's backward: a small GPT trained twice, with tessel.attention and with SDPA.

    python3 examples/python/train_gpt.py [--steps 200] [--seq 1024] [--batch 8] [--layers 4]
                                         [--dim 512] [--heads 8] [--dtype bf16] [--compile]
                                         [--json OUT]

Needs torch and a CUDA GPU (without them it says so and exits 0). Both runs start from the same
weights and see the same batches: a character-level corpus generated here (no download), a
sequence of arithmetic facts like "17+25=42;" whose answers a model can learn. The attention is
causal, its q, k and v in --dtype (the rest of the model in float32); the tessel run calls
tessel.attention (forward and the backward derived by the compiler, through torch.autograd), the
other torch's scaled_dot_product_attention. With --compile both models run under
torch.compile(fullgraph=True): tessel.attention is one op of the graph (docs/torch-compile.md).
Printed: both loss curves every 20 steps, the largest
gap between them, the median step time and the peak memory of each. Exits 1 when the curves
disagree by more than --tolerance (mean over the last 20 steps).
"""
import argparse
import json
import math
import statistics
import sys
import time

from _common import root  # noqa: F401  (puts the build tree's tessel on sys.path)


def corpus(n_chars, seed):
    import random
    rng = random.Random(seed)
    out, size = [], 0
    while size < n_chars:
        a, b = rng.randrange(100), rng.randrange(100)
        out.append(f"{a}+{b}={a + b};")
        size += len(out[-1])
    return "".join(out)[:n_chars]


def build(torch, args, attention):
    nn = torch.nn
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(args.dim), nn.LayerNorm(args.dim)
            self.qkv = nn.Linear(args.dim, 3 * args.dim)
            self.proj = nn.Linear(args.dim, args.dim)
            self.mlp = nn.Sequential(nn.Linear(args.dim, 4 * args.dim), nn.GELU(),
                                     nn.Linear(4 * args.dim, args.dim))

        def forward(self, x):
            B, N, C = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(B, N, 3, args.heads, C // args.heads) \
                .permute(2, 0, 3, 1, 4)
            o = attention(q.to(dt), k.to(dt), v.to(dt)).float()
            x = x + self.proj(o.transpose(1, 2).reshape(B, N, C))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(128, args.dim)
            self.pos = nn.Embedding(args.seq, args.dim)
            self.blocks = nn.ModuleList(Block() for _ in range(args.layers))
            self.ln = nn.LayerNorm(args.dim)
            self.head = nn.Linear(args.dim, 128, bias=False)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln(x))

    torch.manual_seed(args.seed)
    return GPT().cuda()


def train(torch, args, attention, data, name):
    t_start = time.perf_counter()
    model = build(torch, args, attention)
    if args.compile:
        model = torch.compile(model, fullgraph=True)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    gen = torch.Generator(device="cpu").manual_seed(args.seed + 1)
    losses, times = [], []
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    for step in range(args.steps):
        starts = torch.randint(0, data.numel() - args.seq - 1, (args.batch,), generator=gen)
        x = torch.stack([data[s:s + args.seq] for s in starts]).cuda()
        y = torch.stack([data[s + 1:s + args.seq + 1] for s in starts]).cuda()
        t0 = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
        # Progress as it goes (tessel's first step includes compiling its kernels).
        if step % 20 == 0 or step == args.steps - 1:
            print(f"{name} step {step:>4}: loss {losses[-1]:.4f}, "
                  f"{time.perf_counter() - t_start:.1f} s", flush=True)
        if not math.isfinite(losses[-1]):
            break
    return losses, times, torch.cuda.max_memory_allocated()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--dtype", choices=["bf16", "fp16"], default="bf16")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--compile", action="store_true", help="both models under torch.compile")
    ap.add_argument("--json")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("train_gpt: needs torch")
        return 0
    if not torch.cuda.is_available():
        print("train_gpt: needs a CUDA GPU")
        return 0
    import tessel
    F = torch.nn.functional.scaled_dot_product_attention
    data = torch.tensor(list(corpus(2_000_000, args.seed).encode()), dtype=torch.long)
    runs = {}
    for name, attention in (("tessel", lambda q, k, v: tessel.attention(q, k, v, causal=True)),
                            ("sdpa", lambda q, k, v: F(q, k, v, is_causal=True))):
        runs[name] = train(torch, args, attention, data, name)
    (lt, tt, mt), (ls, ts, ms) = runs["tessel"], runs["sdpa"]
    print(f"{'step':>5} {'tessel':>8} {'sdpa':>8}")
    for i in list(range(0, args.steps, 20)) + [args.steps - 1]:
        if i < len(lt) and i < len(ls):
            print(f"{i:>5} {lt[i]:>8.4f} {ls[i]:>8.4f}")
    n = min(len(lt), len(ls))
    gap = max(abs(a - b) for a, b in zip(lt[:n], ls[:n]))
    tail = min(20, n)
    tail_gap = abs(statistics.mean(lt[n - tail:n]) - statistics.mean(ls[n - tail:n]))
    # The first steps include compilation (tessel's JIT, cuDNN's heuristics): the median of the
    # second half is the steady state.
    med = {k: statistics.median(v[1][len(v[1]) // 2:]) * 1e3 for k, v in runs.items()}
    print(f"largest gap {gap:.4f}; mean of the last {tail} steps: tessel "
          f"{statistics.mean(lt[n - tail:n]):.4f}, sdpa {statistics.mean(ls[n - tail:n]):.4f} "
          f"(gap {tail_gap:.4f}, tolerance {args.tolerance})")
    print(f"step time (median, second half): tessel {med['tessel']:.1f} ms, sdpa "
          f"{med['sdpa']:.1f} ms; peak memory: tessel {mt / 2**30:.2f} GiB, sdpa "
          f"{ms / 2**30:.2f} GiB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(args=vars(args), tessel=lt, sdpa=ls, step_ms=med,
                           peak_bytes=dict(tessel=mt, sdpa=ms), gap=gap, tail_gap=tail_gap),
                      f, indent=1)
    ok = n == args.steps and tail_gap <= args.tolerance
    print("OK: the loss curves agree" if ok else "FAILED: the loss curves disagree")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
