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
and (paged) KV caches with FlashAttention's conventions.
"""
import time as _time

_import_started = _time.perf_counter()

from . import language
from . import language as tl
from .errors import CompilationError, KernelRuntimeError
from .jit import CompileOptions, CompiledKernel, JITFunction, jit
from . import cache
from .cache import GpuOptions
from .runtime import from_bf16, to_bf16
from .gpu import DevicePointer, GpuUnavailableError
from .attention import attention, compile_attention
from .backward import attention_backward, compile_attention_backward
from .serving import attention_varlen, attention_with_kvcache
from . import gpu
from . import timing

timing.import_seconds = _time.perf_counter() - _import_started
del _time, _import_started

__all__ = ["jit", "language", "tl", "CompilationError", "KernelRuntimeError", "CompileOptions",
           "GpuOptions", "cache", "CompiledKernel", "JITFunction", "attention", "compile_attention",
           "attention_backward", "compile_attention_backward", "attention_varlen",
           "attention_with_kvcache", "to_bf16",
           "from_bf16", "DevicePointer", "GpuUnavailableError", "gpu"]
