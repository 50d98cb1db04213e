"""scripts/fuzz_differential.py in CI: fixed-seed random cases of tessel.attention, its backward
and the serving entry points on the interpreter against tessel.reference (docs/dev/fuzzing.md);
and that the comparison can fail."""
import pathlib
import sys

import pytest

from dsl_helpers import BUILD  # noqa: F401  (puts the build's package on the path)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts"))
import fuzz_differential  # noqa: E402


@pytest.mark.parametrize("kind,seed", [("forward", 11), ("backward", 12), ("serving", 13),
                                       ("block_mask", 15), ("fp8", 16)])
def test_random_cases_match_the_float64_reference(kind, seed):
    count, failures = fuzz_differential.run([kind], seed, cases=40)
    assert count == 40 and failures == []


def test_torch_cpu_tensors_match_too():
    # --device cpu: the same cases through tessel's torch entry (the interpreter again); the
    # CUDA mode is this path with device="cuda" on a GPU host.
    pytest.importorskip("torch")
    count, failures = fuzz_differential.run(list(fuzz_differential.KINDS), 14, cases=30,
                                            device="cpu")
    assert count == 30 and failures == []


def test_flex_drop_in_matches_too():
    # tessel.flex_attention with FlexAttention's own block masks and mods (torch tensors).
    pytest.importorskip("torch.nn.attention.flex_attention")
    count, failures = fuzz_differential.run(["flex"], 19, cases=40, device="cpu")
    assert count == 40 and failures == []


def test_flash_api_matches_too():
    # tessel.flash.flash_attn_func with FlashAttention's rules (bottom-right where the lengths
    # differ), torch tensors with gradients and numpy arrays.
    pytest.importorskip("torch")
    for device, seed in (("cpu", 20), ("numpy", 21)):
        count, failures = fuzz_differential.run(["flash"], seed, cases=40, device=device)
        assert count == 40 and failures == []


def test_flash_varlen_api_matches_too():
    # tessel.flash.flash_attn_varlen_func with FlashAttention-3's seqused_q, seqused_k and
    # attention_chunk drawn (numpy arrays and torch tensors).
    for device, seed in (("numpy", 22), ("cpu", 23)):
        if device == "cpu":
            pytest.importorskip("torch")
        count, failures = fuzz_differential.run(["flash_varlen"], seed, cases=40, device=device)
        assert count == 40 and failures == []


def test_compiled_entry_points_match_too():
    # --compile: every entry-point call through torch.compile (the ops' fake implementations,
    # autograd and routing), the entry points restored afterwards.
    pytest.importorskip("torch")
    import tessel
    eager = tessel.attention
    count, failures = fuzz_differential.run(list(fuzz_differential.KINDS), 18, cases=12,
                                            device="cpu", compiled=True)
    assert count == 12 and failures == []
    assert tessel.attention is eager


def test_a_wrong_reference_is_found(monkeypatch):
    real = fuzz_differential.reference_attention
    monkeypatch.setattr(fuzz_differential, "reference_attention",
                        lambda *a, causal, **kw: real(*a, causal=not causal, **kw))
    _, failures = fuzz_differential.run(["forward"], 11, cases=20)
    assert len(failures) >= 5 and all(f.startswith("forward ") for f in failures)


def test_an_fp8_output_half_again_too_large_is_found(monkeypatch):
    # FP8's tolerance is loose (P rounded to e4m3), not blind: a reference 1.5 times the true
    # output fails every case whose output is not tiny.
    real = fuzz_differential.reference_attention
    monkeypatch.setattr(fuzz_differential, "reference_attention",
                        lambda *a, **kw: (lambda o, lse: (1.5 * o, lse))(*real(*a, **kw)))
    _, failures = fuzz_differential.run(["fp8"], 16, cases=10)
    assert len(failures) >= 5 and all(f.startswith("fp8 ") for f in failures)


def test_kinds_that_need_torch_are_left_out_on_numpy():
    count, failures = fuzz_differential.run(["forward", "varlen_backward"], 17, cases=4)
    assert count == 4 and failures == []
    with pytest.raises(ValueError, match="need torch"):
        fuzz_differential.run(["varlen_backward"], 17, cases=1)
