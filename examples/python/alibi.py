"""ALiBi: a per-head linear bias on the distance between query and key, slope 2^(-8(h+1)/H)."""
from _common import inputs, reference_attention, report
import numpy as np
import tessel
from tessel import language as tl

H = 4


@tessel.jit
def alibi(score, b, h, q_idx, kv_idx):
    slope = tl.exp2(-8.0 * (h + 1).to(tl.float32) / H)
    return score + slope * (kv_idx - q_idx).to(tl.float32)


q, k, v = inputs(H=H)
o = tessel.attention(q, k, v, causal=True, score_mod=alibi)
ref = reference_attention(q, k, v, causal=True,
                          score=lambda s, b, h, qi, ki: s + 2.0 ** (-8 * (h + 1) / H) * (ki - qi))
report("alibi", o, ref[0])
