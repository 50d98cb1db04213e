"""Sliding-window attention: each query sees itself and the WINDOW - 1 keys before it."""
from _common import inputs, reference_attention, report
import tessel

WINDOW = 24


@tessel.jit
def sliding_window(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx < WINDOW)


q, k, v = inputs()
o = tessel.attention(q, k, v, mask_mod=sliding_window)
ref = reference_attention(q, k, v, allowed=lambda b, h, qi, ki: (qi >= ki) & (qi - ki < WINDOW))
report("sliding window", o, ref[0])
