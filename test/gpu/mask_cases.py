"""Inputs the GPU mask tests and benchmarks share."""


def document_ids(torch, B, N, gen):
    """int32 [B, N] document ids on the GPU: four documents per sequence, cut at three random
    positions (drawn from `gen`, a CUDA generator)."""
    cuts = torch.stack([torch.randperm(N - 1, device="cuda", generator=gen)[:3].sort().values + 1
                        for _ in range(B)])
    return torch.searchsorted(cuts, torch.arange(N, device="cuda").expand(B, N).contiguous(),
                              right=True).to(torch.int32)
