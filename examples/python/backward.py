"""The backward: gradients of causal softcap attention on the interpreter.

tessel derives dq, dk and dv from the naive forward: P is recomputed from Q, K and the saved
log-sum-exp, and the softcap's derivative (1 - tanh^2) is built by the compiler from the
score_mod's own ops. On CUDA tensors that require grad, tessel.attention does the same through
torch.autograd (o.backward(do) fills q.grad, k.grad, v.grad).
"""
from _common import inputs, max_rel_error
import numpy as np
import tessel
from tessel import language as tl
from tessel.reference import reference_attention_backward

CAP = 5.0


@tessel.jit
def softcap(score, b, h, q_idx, kv_idx):
    return CAP * tl.tanh(score / CAP)


q, k, v = inputs(H=2, N=100, D=32)
do = np.random.default_rng(1).standard_normal(q.shape).astype(np.float32)  # dLoss/dO
o, lse = tessel.attention(q, k, v, causal=True, score_mod=softcap, return_lse=True)
dq, dk, dv = tessel.attention_backward(q, k, v, o, lse, do, causal=True, score_mod=softcap)
ref = reference_attention_backward(q, k, v, do, causal=True,
                                   score=lambda s, b, h, qi, ki: CAP * np.tanh(s / CAP),
                                   score_grad=lambda s, b, h, qi, ki: 1 - np.tanh(s / CAP) ** 2)
for name, got, want in zip(("dq", "dk", "dv"), (dq, dk, dv), ref):
    print(f"softcap backward {name}: max error vs float64 numpy = {max_rel_error(got, want):.2e}")
