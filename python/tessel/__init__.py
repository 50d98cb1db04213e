"""tessel: a Triton-style DSL and compiler for FlashAttention kernels, on MLIR.

    import tessel
    from tessel import language as tl

    @tessel.jit
    def kernel(x, y, N: tl.constexpr): ...

    kernel[grid](x, y, N=128)          # numpy arrays: the CPU interpreter
    kernel[grid](xt, yt, N=128)        # CUDA torch tensors (or tessel.DevicePointer): the GPU

`tessel.attention(q, k, v, ...)` has PyTorch scaled_dot_product_attention semantics, with
FlexAttention-style `score_mod` / `mask_mod` written as @tessel.jit functions;
`tessel.attention_varlen` and `tessel.attention_with_kvcache` serve packed variable-length batches
and (paged) KV caches with FlashAttention's conventions; `tessel.distributed.ring_attention`
spreads one long sequence over the ranks of a torch.distributed group. `tessel.autotune` picks a
kernel's block sizes, num_warps and num_stages by timing them (GEMMs, softmax, layer norm: the
tile programs beyond attention).
"""
import time as _time

_import_started = _time.perf_counter()

from . import language
from . import language as tl
from .errors import CompilationError, KernelRuntimeError
from .jit import CompileOptions, CompiledKernel, JITFunction, jit
from . import cache
from .cache import GpuOptions
from .runtime import from_bf16, from_fp8, to_bf16, to_fp8
from .gpu import DevicePointer, GpuUnavailableError
from .attention import attention, compile_attention
from .blocksparse import BlockMask, block_mask
from .backward import attention_backward, compile_attention_backward
from .serving import attention_varlen, attention_with_kvcache
from .sdpa import patch_sdpa, scaled_dot_product_attention
from .flex import create_block_mask, flex_attention
from . import flash                   # FlashAttention's API: from tessel.flash import ...
from .autotune import Autotuner, Config, autotune
from . import gpu
from . import timing

from . import torch_ops as _torch_ops
_torch_ops.register_when_torch_imports()        # torch.compile's ops
timing.import_seconds = _time.perf_counter() - _import_started
del _time, _import_started


def __getattr__(name):
    # tessel.distributed imports torch.distributed when called: loaded on first use, so that
    # `import tessel` stays free of torch.
    if name == "distributed":
        import importlib
        return importlib.import_module(".distributed", __name__)
    raise AttributeError(f"module 'tessel' has no attribute {name!r}")


__all__ = ["jit", "language", "tl", "CompilationError", "KernelRuntimeError", "CompileOptions",
           "GpuOptions", "cache", "CompiledKernel", "JITFunction", "attention", "compile_attention", "block_mask", "BlockMask",
           "attention_backward", "compile_attention_backward", "attention_varlen",
           "attention_with_kvcache", "scaled_dot_product_attention", "patch_sdpa",
           "flex_attention",
           "create_block_mask", "flash", "to_bf16",
           "from_bf16", "to_fp8", "from_fp8", "DevicePointer", "GpuUnavailableError", "gpu", "autotune", "Autotuner",
           "Config"]
