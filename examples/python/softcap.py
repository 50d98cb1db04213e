"""Logit soft-capping (Gemma 2): scores squashed into (-CAP, CAP) with tanh."""
from _common import inputs, reference_attention, report
import numpy as np
import tessel
from tessel import language as tl

CAP = 2.0


@tessel.jit
def softcap(score, b, h, q_idx, kv_idx):
    return CAP * tl.tanh(score / CAP)


q, k, v = inputs()
o = tessel.attention(q, k, v, score_mod=softcap)
ref = reference_attention(q, k, v, score=lambda s, b, h, qi, ki: CAP * np.tanh(s / CAP))
report("softcap", o, ref[0])
