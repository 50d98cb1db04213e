"""tessel.attention on inputs that require grad: an error naming what is missing, never an
output without a grad_fn (issue 11). torch is not installed in CI, so the inputs are stand-ins
with a `requires_grad` attribute, which is all the check reads; test/gpu/test_python_gpu.py checks
the real thing on CUDA tensors."""
import sys
import types

import numpy as np
import pytest

import dsl_helpers  # noqa: F401  (puts the built package on sys.path)
import tessel

attention_module = sys.modules["tessel.attention"]   # tessel.attention is the function


class GradArray:
    """An object that says it requires grad, like a torch tensor with requires_grad=True."""

    def __init__(self, requires_grad):
        self.requires_grad = requires_grad
        self.shape = (1, 1, 4, 16)


def test_inputs_requiring_grad_are_refused_with_a_clear_error():
    q = GradArray(True)
    k = GradArray(False)
    with pytest.raises(NotImplementedError) as err:
        tessel.attention(q, k, GradArray(True))
    text = str(err.value)
    assert "q, v require grad" in text
    assert "no backward" in text and "grad_fn" in text
    with pytest.raises(NotImplementedError, match=r"k requires grad"):
        tessel.attention(GradArray(False), GradArray(True), GradArray(False))


def test_grad_mode_off_lets_inputs_through(monkeypatch):
    fake_torch = types.ModuleType("torch")
    fake_torch.Tensor = type("Tensor", (), {})
    fake_torch.is_grad_enabled = lambda: False
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    attention_module._refuse_grad(GradArray(True), GradArray(True), GradArray(True))
    fake_torch.is_grad_enabled = lambda: True
    with pytest.raises(NotImplementedError, match="q, k, v require grad"):
        attention_module._refuse_grad(GradArray(True), GradArray(True), GradArray(True))


def test_numpy_inputs_are_unaffected():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 1, 5, 16)).astype(np.float32)
    o = tessel.attention(q, q, q)
    assert o.shape == q.shape and np.all(np.isfinite(o))


def test_value_head_dim_grad_route_is_for_cuda_tensors_only(monkeypatch):
    # attention.VALUE_HEAD_DIM_GRAD (the DV forward with gradients) takes CUDA tensors only:
    # stand-ins that require grad, numpy arrays and the switch off all keep the padded call.
    monkeypatch.setattr(attention_module, "VALUE_HEAD_DIM_GRAD", True)
    q = np.zeros((1, 2, 8, 32), np.float32)
    v = np.zeros((1, 2, 8, 16), np.float32)
    assert not attention_module.value_head_dim_grad(q, q, v, None, None, None)
    stand_in = types.SimpleNamespace(requires_grad=True, is_cuda=False, shape=(1, 2, 8, 32))
    assert not attention_module.value_head_dim_grad(stand_in, stand_in, v, None, None, None)
    monkeypatch.setattr(attention_module, "VALUE_HEAD_DIM_GRAD", False)
    cuda_like = types.SimpleNamespace(requires_grad=True, is_cuda=True, shape=(1, 2, 8, 32))
    assert not attention_module.value_head_dim_grad(cuda_like, cuda_like, v, None, None, None)
