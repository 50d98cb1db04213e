"""Scratch (not committed): causal varlen ablation."""
import sys
import torch
import tessel
from tessel import language as tl
from tessel.jit import jit
from tessel.grid import block_and_row, fold_grid
from bench_decode import make_timer

@jit
def varlen_rev(q, k, v, o, lse_out, cu_q, cu_k, B, total_q, total_k, H, HKV, max_nq, scale,
                  q_rs: tl.constexpr, q_hs: tl.constexpr, k_rs: tl.constexpr,
                  k_hs: tl.constexpr, v_rs: tl.constexpr, v_hs: tl.constexpr, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  CAUSAL: tl.constexpr):
    pid_m, bh = block_and_row(tl.cdiv(max_nq, BLOCK_M))
    pid_m = tl.cdiv(max_nq, BLOCK_M) - 1 - pid_m
    b = bh // H
    h = bh % H
    kv_h = h // (H // HKV)
    cqd = tl.make_desc(cu_q, shape=(B + 1,), strides=(1,))
    ckd = tl.make_desc(cu_k, shape=(B + 1,), strides=(1,))
    q0 = tl.maximum(tl.load_scalar(cqd, (b,)), 0)
    q_end = tl.minimum(tl.load_scalar(cqd, (b + 1,)), total_q)
    k0 = tl.maximum(tl.load_scalar(ckd, (b,)), 0)
    k_end = tl.minimum(tl.load_scalar(ckd, (b + 1,)), total_k)
    nq = q_end - q0
    nk = k_end - k0
    qd = tl.make_desc(q, shape=(q_end, D), strides=(q_rs, 1), offset=h * q_hs)
    kd = tl.make_desc(k, shape=(k_end, D), strides=(k_rs, 1), offset=kv_h * k_hs)
    vd = tl.make_desc(v, shape=(k_end, D), strides=(v_rs, 1), offset=kv_h * v_hs)
    od = tl.make_desc(o, shape=(q_end, D), strides=(H * D, 1), offset=h * D)
    ld = tl.make_desc(lse_out, shape=(q_end,), strides=(1,), offset=h * total_q)   # [H, total_q]

    m0 = pid_m * BLOCK_M
    qt = tl.load(qd, (q0 + m0, 0), shape=(BLOCK_M, D))
    # Bottom-right causal: query i sees keys up to i + nk - nq.
    q_idx = tl.broadcast_to((m0 + (nk - nq) + tl.arange(0, BLOCK_M))[:, None], (BLOCK_M, BLOCK_N))
    acc = tl.zeros((BLOCK_M, D), tl.float32)
    lse = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    for j in tl.stream(k0, k_end, BLOCK_N):      # the induction variable is the row: a plain load
        kt = tl.load(kd, (j, 0), shape=(BLOCK_N, D))
        s = tl.dot(qt, kt.T) * scale
        kv_idx = tl.broadcast_to((j - k0 + tl.arange(0, BLOCK_N))[None, :], (BLOCK_M, BLOCK_N))
        mask = kv_idx < nk
        if CAUSAL:
            mask = mask & (q_idx >= kv_idx)
        s = tl.where(mask, s, float("-inf"))
        p, lse = tl.softmax(s, axis=1, return_lse=True)
        vt = tl.load(vd, (j, 0), shape=(BLOCK_N, D))
        acc += tl.dot(p.to(vt.dtype), vt)
    tl.store(od, (q0 + m0, 0), acc.to(qt.dtype))
    tl.store(ld, (q0 + m0,), lse)




@jit
def attention_rev(q, k, v, o, lse_out, nq, nk, H, HKV, scale,
                     D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     CAUSAL: tl.constexpr, SCORE_MOD: tl.constexpr, MASK_MOD: tl.constexpr):
    # grid.fold_grid: query blocks on x, b·h rows on y, folded into x past y's 65,535 cap.
    pid_m, bh = block_and_row(tl.cdiv(nq, BLOCK_M))
    pid_m = tl.cdiv(nq, BLOCK_M) - 1 - pid_m
    b = bh // H
    h = bh % H
    kv_h = h // (H // HKV)                      # grouped-query: heads share a key/value head
    q_rows = bh * nq
    kv_rows = (b * HKV + kv_h) * nk
    qd = tl.make_desc(q, shape=(nq, D), strides=(D, 1), offset=q_rows * D)
    kd = tl.make_desc(k, shape=(nk, D), strides=(D, 1), offset=kv_rows * D)
    vd = tl.make_desc(v, shape=(nk, D), strides=(D, 1), offset=kv_rows * D)
    od = tl.make_desc(o, shape=(nq, D), strides=(D, 1), offset=q_rows * D)
    ld = tl.make_desc(lse_out, shape=(nq,), strides=(1,), offset=q_rows)

    m0 = pid_m * BLOCK_M
    qt = tl.load(qd, (m0, 0), shape=(BLOCK_M, D))
    q_idx = tl.broadcast_to((m0 + tl.arange(0, BLOCK_M))[:, None], (BLOCK_M, BLOCK_N))
    acc = tl.zeros((BLOCK_M, D), tl.float32)
    lse = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    for j in tl.stream(0, nk, BLOCK_N):
        kt = tl.load(kd, (j, 0), shape=(BLOCK_N, D))
        s = tl.dot(qt, kt.T) * scale
        kv_idx = tl.broadcast_to((j + tl.arange(0, BLOCK_N))[None, :], (BLOCK_M, BLOCK_N))
        if SCORE_MOD is not None:
            s = SCORE_MOD(s, b, h, q_idx, kv_idx)
        mask = kv_idx < nk
        if CAUSAL:
            mask = mask & (q_idx >= kv_idx)
        if MASK_MOD is not None:
            mask = mask & MASK_MOD(b, h, q_idx, kv_idx)
        s = tl.where(mask, s, float("-inf"))
        p, lse = tl.softmax(s, axis=1, return_lse=True)   # streamed over j
        vt = tl.load(vd, (j, 0), shape=(BLOCK_N, D))
        acc += tl.dot(p.to(vt.dtype), vt)
    tl.store(od, (m0, 0), acc.to(qt.dtype))
    tl.store(ld, (m0,), lse)


def dense_rev():
    timed, _ = make_timer(torch)
    for D, n, bm, bn in ((128, 4096, 64, 64), (128, 16384, 64, 64), (64, 16384, 64, 128), (256, 16384, 128, 64)):
        B, H = 16384 // n, 2048 // D
        q, k, v = (torch.randn(B, H, n, D, device="cuda", dtype=torch.float16) for _ in range(3))
        fl = 4.0 * B * H * n * n * D / 2
        f = lambda: tessel.attention(q, k, v, causal=True)
        want = f()
        grid = fold_grid(-(-n // bm), B * H)
        def g():
            o = torch.empty_like(q); lse = torch.empty(B, H, n, device="cuda")
            attention_rev[grid](q, k, v, o, lse, n, n, H, H, D ** -0.5, D=D, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=True, SCORE_MOD=None, MASK_MOD=None)
            return o
        got = g()
        print(f"dense causal d{D} n{n}: default {fl / timed(f) / 1e9:.1f} reversed {fl / timed(g) / 1e9:.1f} diff {(got.float() - want.float()).abs().max().item():.2e}", flush=True)


def main():
    timed, _ = make_timer(torch)
    S, L, H, D = 64, 8192, 16, 128
    gen = torch.Generator(device="cpu").manual_seed(0)
    lengths = torch.randint(1, L + 1, (S,), generator=gen); lengths[0] = L
    cu = torch.zeros(S + 1, dtype=torch.int32); cu[1:] = torch.cumsum(lengths, 0)
    total = int(cu[-1]); cud = cu.cuda()
    q, k, v = (torch.randn(total, H, D, device="cuda", dtype=torch.float16) for _ in range(3))
    pairs = float((lengths.double() ** 2).sum())
    for causal in (True, False):
        fl = 4.0 * D * H * pairs / (2 if causal else 1)
        res = {}
        for bm, bn in ((64, 64), (128, 64), (64, 128), (128, 128)):
            try:
                f = lambda: tessel.attention_varlen(q, k, v, cud, cud, L, L, causal=causal, block_m=bm, block_n=bn)
                f(); res[f"varlen {bm}x{bn}"] = fl / timed(f) / 1e9
            except Exception as e:
                res[f"varlen {bm}x{bn}"] = str(e)[:80]
        for bm in (64, 128):
            o = torch.empty_like(q); lse = torch.empty(H, total, device="cuda")
            grid = fold_grid(-(-L // bm), S * H)
            def g():
                o = torch.empty_like(q); lse = torch.empty(H, total, device="cuda")
                varlen_rev[grid](q, k, v, o, lse, cud, cud, S, total, total, H, H, L, D ** -0.5, q_rs=H * D, q_hs=D, k_rs=H * D, k_hs=D, v_rs=H * D, v_hs=D, D=D, BLOCK_M=bm, BLOCK_N=64, CAUSAL=causal)
                return o
            want = tessel.attention_varlen(q, k, v, cud, cud, L, L, causal=causal)
            got = g()
            res[f"rev {bm}x64"] = fl / timed(g) / 1e9
            res[f"rev {bm}x64 diff"] = (got.float() - want.float()).abs().max().item()
        # the same tokens, dense: sequences of the mean length... and the batch of one long one
        for n in (4096, 8192):
            B = max(1, 65536 // n)
            qd, kd, vd = (torch.randn(B, H, n, D, device="cuda", dtype=torch.float16) for _ in range(3))
            f = lambda: tessel.attention(qd, kd, vd, causal=causal)
            f(); res[f"dense BHSD n{n}"] = 4.0 * D * H * B * n * n / (2 if causal else 1) / timed(f) / 1e9
            qs, ks, vs = (x.transpose(1, 2).contiguous().transpose(1, 2) for x in (qd, kd, vd))
            cu2 = torch.arange(0, B * n + 1, n, dtype=torch.int32, device="cuda")
            qp, kp, vp = (x.transpose(1, 2).reshape(B * n, H, D) for x in (qs, ks, vs))
            f = lambda: tessel.attention_varlen(qp, kp, vp, cu2, cu2, n, n, causal=causal)
            f(); res[f"varlen equal n{n}"] = 4.0 * D * H * B * n * n / (2 if causal else 1) / timed(f) / 1e9
        print("causal" if causal else "full", {k: (round(v, 1) if isinstance(v, float) and "diff" not in k else v) for k, v in res.items()}, flush=True)



def decode():
    timed, _ = make_timer(torch)
    B, H, Hkv, D = 8, 32, 8, 128
    for nk in (1024, 2048, 4096, 8192, 65536):
        q = torch.randn(B, 1, H, D, device="cuda", dtype=torch.float16)
        lens = torch.full((B,), nk, dtype=torch.int32, device="cuda")
        kc, vc = (torch.randn(B, nk, Hkv, D, device="cuda", dtype=torch.float16) for _ in range(2))
        gb = lambda ms: 2 * B * nk * Hkv * D * 2 / ms / 1e6
        res = {}
        for ns in (None, 1, 2, 4):
            f = lambda: tessel.attention_with_kvcache(q, kc, vc, lens, num_splits=ns)
            f(); res[f"contig {ns}"] = round(gb(timed(f)))
        from tessel import serving_decode
        keep = serving_decode.num_splits_heuristic
        serving_decode.num_splits_heuristic = lambda *a: 1
        f = lambda: tessel.attention_with_kvcache(q, kc, vc, lens)
        f(); res["contig packed-1"] = round(gb(timed(f)))
        serving_decode.num_splits_heuristic = keep
        page = 256
        mp = nk // page
        perm = torch.randperm(B * mp, device="cuda").int()
        table = perm.view(B, mp)
        kp, vp = (x.view(B * mp, page, Hkv, D)[perm.argsort()].contiguous() for x in (kc, vc))
        want = tessel.attention_with_kvcache(q, kc, vc, lens)
        for ns in (None, 4, 8, 16):
            f = lambda: tessel.attention_with_kvcache(q, kp, vp, lens, block_table=table, num_splits=ns)
            got = f(); res[f"paged {ns}"] = round(gb(timed(f)))
            res[f"paged {ns} diff"] = round((got.float() - want.float()).abs().max().item(), 5)
        try:
            with torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.CUDNN_ATTENTION]):
                qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, kc, vc))
                F = torch.nn.functional.scaled_dot_product_attention
                f = lambda: F(qt, kt, vt, enable_gqa=True)
                f(); res["cudnn"] = round(gb(timed(f)))
        except Exception as e:
            res["cudnn"] = str(e)[:60]
        print("decode nk", nk, res, flush=True)


decode()
dense_rev()
main()
