"""Document masking: packed sequences attend causally within their own document only.

The document boundaries are compile-time constants here; the loop over them is unrolled.
"""
from _common import inputs, reference_attention, report
import numpy as np
import tessel
from tessel import language as tl

DOC_STARTS = (37, 60)   # documents [0, 37), [37, 60), [60, N)


@tessel.jit
def document_id(idx):
    doc = idx * 0
    for start in DOC_STARTS:
        doc = doc + (idx >= start).to(tl.int32)
    return doc


@tessel.jit
def document_mask(b, h, q_idx, kv_idx):
    return (document_id(q_idx) == document_id(kv_idx)) & (q_idx >= kv_idx)


def doc_np(i):
    return sum((i >= s).astype(int) for s in DOC_STARTS)


q, k, v = inputs()
o = tessel.attention(q, k, v, mask_mod=document_mask)
ref = reference_attention(q, k, v, allowed=lambda b, h, qi, ki: (doc_np(qi) == doc_np(ki)) & (qi >= ki))
report("document mask", o, ref[0])
