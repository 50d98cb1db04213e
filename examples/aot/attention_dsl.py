"""The DSL file of the AOT example: tessel's attention kernel and two mask variants.

`python -m tessel aot examples/aot/attention_dsl.py --spec ... -o OUT` traces `attention_kernel`
from here; a spec's `mask=sliding_window` or `mask=prefix_lm` names one of the mask_mods below.
A mask variant is a compile-time choice (its code is traced into the kernel); its parameters
(the window, the prefix length) are constants of this file.
"""
import tessel
from tessel.attention import attention_kernel  # noqa: F401  (the kernel tesselc compiles)

WINDOW = 64          # each query sees itself and the WINDOW - 1 keys before it
PREFIX = 32          # keys before PREFIX are visible to every query


@tessel.jit
def sliding_window(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx < 64)


@tessel.jit
def prefix_lm(b, h, q_idx, kv_idx):
    return (kv_idx < 32) | (q_idx >= kv_idx)
