"""The DSL file of the AOT example: tessel's attention kernel and two mask variants.

`python -m tessel aot examples/aot/attention_dsl.py --spec ... -o OUT` traces `attention_kernel`
from here; a spec's `mask=sliding_window` or `mask=prefix_lm` names one of the mask_mods below.
A mask variant is a compile-time choice (its code is traced into the kernel); its parameters
(a window of 64 keys, a prefix of 32) are constants written into the functions.
"""
import tessel
from tessel.attention import attention_kernel  # noqa: F401  (the kernel tesselc compiles)


@tessel.jit
def sliding_window(b, h, q_idx, kv_idx):
    # Each query sees itself and the 63 keys before it.
    return (q_idx >= kv_idx) & (q_idx - kv_idx < 64)


@tessel.jit
def prefix_lm(b, h, q_idx, kv_idx):
    # The first 32 keys are visible to every query; the rest causally.
    return (kv_idx < 32) | (q_idx >= kv_idx)
