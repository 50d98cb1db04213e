"""Document masking from a tensor of per-token document ids, as FlexAttention users write it:
the mask_mod indexes a tensor it captures (here a closure variable). The ids are a kernel
argument, not constants: new ids (another packing of the batch) reuse the compiled kernel.
"""
from _common import inputs, reference_attention, report
import numpy as np
import tessel


def document_mask(doc):
    def mask(b, h, q_idx, kv_idx):
        return doc[b, q_idx] == doc[b, kv_idx]
    return mask


q, k, v = inputs(B=2)
N = q.shape[2]
for lengths in ([37, 23, 40], [10, 90]):
    doc = np.zeros((2, N), np.int32)
    for b in range(2):
        doc[b] = np.searchsorted(np.cumsum(lengths[::1 - 2 * b])[:-1], np.arange(N), side="right")
    o = tessel.attention(q, k, v, causal=True, mask_mod=document_mask(doc))
    ref = reference_attention(q, k, v, causal=True,
                              allowed=lambda b, h, qi, ki: doc[b][qi] == doc[b][ki])
    report(f"document ids {lengths}", o, ref[0])
