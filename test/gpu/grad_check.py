"""The GPU backward tests' accuracy rule, FlashAttention's: each gradient's largest error against
float64 is at most twice that of the same computation in the inputs' precision (PyTorch's own
backward), plus a small absolute slack."""


def assert_within_twice_torch(got, want, low, names=("dq", "dk", "dv")):
    """got: tessel's gradients; want: float64 autograd's; low: autograd's in the input dtype."""
    for name, g, w, lo in zip(names, got, want, low):
        err = (g.double() - w).abs().max().item()
        base = (lo.double() - w).abs().max().item()
        assert err <= 2 * base + 1e-5 * max(1.0, w.abs().max().item()), (name, err, base)
