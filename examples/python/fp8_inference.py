"""FP8 (e4m3) attention for inference, FlashAttention-3's recipe: q, k and v scaled into e4m3's
range per (batch, kv head), the scales given back as descales, the output in bf16 or fp16.

On numpy arrays (uint8 bit patterns, tessel.to_fp8) it runs on the CPU interpreter, as here; on
CUDA torch.float8_e4m3fn tensors on an sm_90a GPU (head dim 128; docs/dev/fp8.md)."""
from _common import reference_attention, report
import numpy as np
import tessel

B, H, Hkv, N, D = 2, 4, 2, 96, 64
rng = np.random.default_rng(0)
q = rng.standard_normal((B, H, N, D))
k = rng.standard_normal((B, Hkv, N, D))
v = rng.standard_normal((B, Hkv, N, D)) * 3


def quantize(x, heads):
    """(x8, descale [B, heads]): x ≈ x8 · descale, each (batch, head) scaled to e4m3's ±448."""
    descale = np.abs(x).max(axis=(2, 3)) / 448.0
    return tessel.to_fp8(x / descale[:, :, None, None]), descale


# q is quantized per (batch, query head) for its own accuracy; its descale is then taken per
# (batch, kv head) as FA3 does, so the query heads of a group share their group's largest scale.
descale_q = np.abs(q).reshape(B, Hkv, H // Hkv, N, D).max(axis=(2, 3, 4)) / 448.0
q8 = tessel.to_fp8(q / np.repeat(descale_q, H // Hkv, axis=1)[:, :, None, None])
k8, descale_k = quantize(k, Hkv)
v8, descale_v = quantize(v, Hkv)

o, lse = tessel.attention(q8, k8, v8, causal=True, enable_gqa=True, return_lse=True,
                          descale_q=descale_q, descale_k=descale_k, descale_v=descale_v,
                          out_dtype=np.float16)

# Against float64 attention of what the FP8 inputs hold (the recipe's own error: P rounded to
# e4m3 before P·V), and of the unquantized inputs (the quantization's error on top).
dq = tessel.from_fp8(q8) * np.repeat(descale_q, H // Hkv, axis=1)[:, :, None, None]
dk = tessel.from_fp8(k8) * descale_k[:, :, None, None]
dv = tessel.from_fp8(v8) * descale_v[:, :, None, None]
for name, inputs in (("its dequantized inputs", (dq, dk, dv)),
                     ("the unquantized inputs", (q, k, v))):
    report(f"fp8 vs {name}", o, reference_attention(*inputs, causal=True, enable_gqa=True)[0])
