"""v with a head dim of its own, as DeepSeek's MLA prefill has it: q and k of 192 columns (128
of content and 64 of rotary position), v of 128. The output has v's 128 columns and the scale
is 1/sqrt(192); tessel.attention runs the smaller side padded with zero columns (exact), or,
where attention.VALUE_HEAD_DIM_KERNEL allows, a kernel with v's width of its own."""
import numpy as np
from _common import report, reference_attention
import tessel

rng = np.random.default_rng(0)
q, k = (rng.standard_normal((1, 4, 100, 192)).astype(np.float32) for _ in range(2))
v = rng.standard_normal((1, 4, 100, 128)).astype(np.float32)
o = tessel.attention(q, k, v, causal=True)
assert o.shape == (1, 4, 100, 128)
report("value head dim 192/128", o, reference_attention(q, k, v, causal=True)[0])
