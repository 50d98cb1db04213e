"""Tensors past the kernels' 32-bit element offsets (attention.I32_ELEMENTS = 2^31):
tessel.attention runs them in chunks of batches, or of whole GQA head groups where one batch
alone is too large. Here the limit is lowered so that small inputs take the same path on the interpreter; the
chunked result must equal the one-call result exactly (each (batch, head) runs the same
program). test/gpu/test_python_gpu.py does the same on CUDA tensors, with gradients."""
import numpy as np
import pytest

from dsl_helpers import BUILD  # noqa: F401 (puts the build's package on the path)
import tessel
import importlib

attention_module = importlib.import_module("tessel.attention")


def inputs(B=3, H=4, Hkv=2, N=40, D=16, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((B, H, N, D)).astype(np.float32),
            rng.standard_normal((B, Hkv, N, D)).astype(np.float32),
            rng.standard_normal((B, Hkv, N, D)).astype(np.float32))


@pytest.mark.parametrize("limit", [4096, 1500], ids=["batches", "head-groups"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_chunks_equal_one_call(limit, causal, monkeypatch):
    q, k, v = inputs()
    want, want_lse = tessel.attention(q, k, v, causal=causal, enable_gqa=True, return_lse=True,
                                      block_m=16, block_n=16)
    monkeypatch.setattr(attention_module, "I32_ELEMENTS", limit)
    calls = []
    real = attention_module.attention
    monkeypatch.setattr(attention_module, "attention",
                        lambda *a, **kw: calls.append(a[0].shape) or real(*a, **kw))
    got, lse = tessel.attention(q, k, v, causal=causal, enable_gqa=True, return_lse=True,
                                block_m=16, block_n=16)
    assert got.shape == want.shape and lse.shape == want_lse.shape
    assert np.array_equal(got, want) and np.array_equal(lse, want_lse)
    # One call per batch (limit 4096: a batch spans 2560 elements) or per GQA group of a batch
    # (limit 1500: a group's q spans 1280).
    assert calls == ([(1, 4, 40, 16)] * 3 if limit == 4096 else [(1, 2, 40, 16)] * 6), calls


def test_mods_past_the_limit_are_refused(monkeypatch):
    q, k, v = inputs()
    monkeypatch.setattr(attention_module, "I32_ELEMENTS", 4096)
    with pytest.raises(ValueError, match="32-bit offsets"):
        tessel.attention(q, k, v, enable_gqa=True, mask_mod=lambda b, h, qi, ki: qi >= ki)
    with pytest.raises(ValueError, match="one head of one batch"):
        monkeypatch.setattr(attention_module, "I32_ELEMENTS", 600)
        tessel.attention(q, k, v, enable_gqa=True)


def test_backward_past_the_limit_is_refused(monkeypatch):
    q, k, v = inputs()
    o, lse = tessel.attention(q, k, v, enable_gqa=True, return_lse=True)
    monkeypatch.setattr(attention_module, "I32_ELEMENTS", 4096)
    with pytest.raises(ValueError, match="per chunk of batches"):
        tessel.attention_backward(q, k, v, o, lse, o, enable_gqa=True)
