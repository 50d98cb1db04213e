"""torch CPU tensors at the attention entry points: they run on the CPU interpreter.

tessel's kernels take numpy arrays on the CPU and CUDA tensors on the GPU. The functions a
PyTorch user calls — tessel.attention, attention_backward, attention_varlen,
attention_with_kvcache — take torch CPU tensors too, as SDPA and FlexAttention do: each tensor
is seen as a numpy array of the same memory (bfloat16 as uint16 bit patterns, float8_e4m3fn as
uint8: tessel's numpy conventions), the call runs on the interpreter, and its arrays come back
as tensors. tessel.attention on CPU tensors that require grad (grad mode on) returns outputs
with a grad_fn whose backward runs attention_backward on the interpreter. docs/dsl.md,
"Which backend".
"""
import numpy as np

from . import gpu


def is_cpu_tensor(x):
    """Whether x is a torch tensor on the CPU (cheap for anything else: no torch import)."""
    return gpu.is_torch_tensor(x) and not x.is_cuda and str(x.device) == "cpu"


def to_numpy(x):
    """A torch CPU tensor as a numpy array of its memory (detached; bf16 → uint16 and
    float8_e4m3fn → uint8 bit patterns); anything else as it is."""
    if not is_cpu_tensor(x):
        return x
    torch = gpu.torch_module()
    x = x.detach()
    if x.dtype == torch.bfloat16:
        return x.view(torch.int16).numpy().view(np.uint16)
    if x.dtype == getattr(torch, "float8_e4m3fn", None):
        return x.view(torch.uint8).numpy()
    return x.numpy()


def to_torch(x):
    """numpy results (an array, or a tuple of them) as torch CPU tensors of the same memory:
    uint16 arrays hold bf16 bits (tessel's convention), so they come back as bfloat16."""
    if isinstance(x, tuple):
        return tuple(to_torch(y) for y in x)
    if not isinstance(x, np.ndarray):
        return x
    torch = gpu.torch_module()
    if x.dtype == np.uint16:
        return torch.from_numpy(x.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(x)


def check_dtypes(fn_name, named):
    """A TypeError naming the torch dtype, for inputs the interpreter does not take (float64:
    computing it in float32 would lose precision silently), instead of numpy's wording."""
    torch = gpu.torch_module()
    allowed = (torch.float32, torch.float16, torch.bfloat16,
               getattr(torch, "float8_e4m3fn", torch.float32))
    for name, x in named:
        if is_cpu_tensor(x) and x.dtype not in allowed:
            raise TypeError(f"tessel.{fn_name}: {name} is {x.dtype}; CPU tensors run as float32, "
                            "float16, bfloat16 or float8_e4m3fn (cast it, e.g. x.float())")


def needs_grad(*tensors):
    """Whether autograd wants gradients of any of these (one requires grad, grad mode on)."""
    if not any(getattr(t, "requires_grad", False) is True for t in tensors):
        return False
    enabled = getattr(gpu.torch_module(), "is_grad_enabled", None)
    return True if enabled is None else bool(enabled())


def call(fn, *args, **kwargs):
    """fn (a numpy entry point) on args and kwargs with their CPU tensors seen as numpy
    arrays; its arrays back as tensors. The arrays fn sees carry no requires_grad, so callers
    check gradients on the tensors first (refuse_grad, attention)."""
    return to_torch(fn(*(to_numpy(a) for a in args),
                       **{name: to_numpy(a) for name, a in kwargs.items()}))


def refuse_grad(fn_name, named):
    """An error for inputs that require grad where the entry point has no backward (serving)."""
    needs = [n for n, x in named if getattr(x, "requires_grad", False) is True]
    if needs and needs_grad(*(x for _, x in named)):
        raise NotImplementedError(
            f"tessel.{fn_name}: {', '.join(needs)} require{'s' if len(needs) == 1 else ''} "
            f"grad, but {fn_name} has no backward: detach the inputs or call it under "
            "torch.no_grad()")


_function = None

# attention's keyword arguments that attention_backward takes too.
_BACKWARD_OPTIONS = ("causal", "scale", "score_mod", "mask_mod", "enable_gqa", "block_mask",
                     "deterministic", "window_size", "softcap", "alibi_slopes")


def _autograd_function():
    """tessel.attention on CPU tensors as a torch.autograd.Function: the forward on the
    interpreter with its LSE, the backward by attention_backward on the saved arrays."""
    global _function
    if _function is not None:
        return _function
    torch = gpu.torch_module()
    from .attention import attention
    from .backward import attention_backward

    class TesselAttentionCPU(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, options):
            arrays = [to_numpy(x) for x in (q, k, v)]
            forward = {n: to_numpy(a) for n, a in options.items()}
            o, lse = attention(*arrays, return_lse=True, **forward)
            ctx.arrays = (*arrays, o, lse)
            ctx.options = forward
            ctx.set_materialize_grads(False)
            return to_torch(o), to_torch(lse)

        @staticmethod
        def backward(ctx, do, dlse):
            q, k, v, o, lse = ctx.arrays
            do = np.zeros_like(o) if do is None else to_numpy(do)
            # The forward's block sizes are not the backward programs' (their own defaults).
            options = {n: a for n, a in ctx.options.items() if n in _BACKWARD_OPTIONS}
            dq, dk, dv = attention_backward(q, k, v, o, lse, do, dlse=to_numpy(dlse), **options)
            return to_torch(dq), to_torch(dk), to_torch(dv), None

    _function = TesselAttentionCPU
    return _function


def attention(q, k, v, return_lse, **options):
    """tessel.attention on torch CPU tensors (options: its keyword arguments but return_lse)."""
    from .attention import attention as dense
    check_dtypes("attention", (("q", q), ("k", k), ("v", v)))
    if not needs_grad(q, k, v):
        return call(dense, q, k, v, return_lse=return_lse, **options)
    if q.element_size() == 1:
        raise NotImplementedError("FP8 attention has no backward: call it under "
                                  "torch.no_grad() or on tensors that do not require grad")
    score_mod = options.get("score_mod")
    if score_mod is not None:
        # As on CUDA: a score_mod the compiler cannot differentiate fails here, at its line.
        from .backward import check_differentiable
        check_differentiable(score_mod, gpu.torch_dtype_name(q), q.shape[-1])
    o, lse = _autograd_function().apply(q, k, v, options)
    return (o, lse) if return_lse else o
