"""Grouped-query attention: 4 query heads share 2 key/value heads (head h reads h // 2)."""
from _common import inputs, reference_attention, report
import tessel

q, k, v = inputs(H=4, Hkv=2)
o = tessel.attention(q, k, v, causal=True, enable_gqa=True)
report("grouped-query", o, reference_attention(q, k, v, causal=True, enable_gqa=True)[0])
