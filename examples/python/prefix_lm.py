"""Prefix-LM: the first PREFIX tokens are seen by everyone, the rest causally."""
from _common import inputs, reference_attention, report
import tessel

PREFIX = 20


@tessel.jit
def prefix_lm(b, h, q_idx, kv_idx):
    return (kv_idx < PREFIX) | (q_idx >= kv_idx)


q, k, v = inputs()
o = tessel.attention(q, k, v, mask_mod=prefix_lm)
ref = reference_attention(q, k, v, allowed=lambda b, h, qi, ki: (ki < PREFIX) | (qi >= ki))
report("prefix-lm", o, ref[0])
