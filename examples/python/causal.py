"""Causal attention (SDPA is_causal: query i sees keys 0..i)."""
from _common import inputs, reference_attention, report
import tessel

q, k, v = inputs()
o = tessel.attention(q, k, v, causal=True)
report("causal", o, reference_attention(q, k, v, causal=True)[0])
