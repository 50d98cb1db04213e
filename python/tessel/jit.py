"""@tessel.jit: specialise a DSL function for its arguments, compile it, launch it.

A JITFunction is called as ``kernel[grid](*args, **constexprs)``. The specialisation key is the
argument signature (element types of array arguments, types of scalars) plus the values of the
tl.constexpr parameters; each key is traced once into tile IR, verified, optimised with the
pipeline named in the CompileOptions, and cached in memory. ``CompiledKernel.asm`` keeps the IR
after the front end ("tile") and after the pipeline ("tile-opt").
"""
import ast
import dataclasses
import hashlib
import inspect
import os

from . import language as tl
from . import runtime
from .errors import CompilationError
from .frontend import CodeGenerator, FunctionSource, TVal, _Return

VERSION = "0.1.0"


@dataclasses.dataclass(frozen=True)
class CompileOptions:
    """Every option that changes the generated code. Frozen: its hash feeds the cache key."""

    pipeline: str = dataclasses.field(default="tile-optimize", metadata={"code": True})
    # Where a kernel runs, not what it compiles to: the GPU cache key leaves it out.
    backend: str = dataclasses.field(default="interpreter", metadata={"code": False})

    def digest(self):
        fields = sorted(dataclasses.asdict(self).items())
        return hashlib.sha256(repr(fields).encode()).hexdigest()


def _dump_ir():
    return os.environ.get("TESSEL_DUMP_IR", "") not in ("", "0")


class CompiledKernel:
    """One specialisation of a kernel: its IR, its signature and a way to run it."""

    def __init__(self, name, builder, params, asm, key, options):
        self.name = name
        self._builder = builder
        self.params = params          # [(name, kind, dtype)] of the run-time parameters
        self.asm = asm                # {"tile": ..., "tile-opt": ...}
        self.specialization = key
        self.options = options

    def key_ingredients(self, gpu=None):
        """What the GPU cache key of this kernel is made of (tessel/cache.py)."""
        from . import cache
        return cache.ingredients(self, gpu or cache.GpuOptions())

    def key(self, gpu=None):
        """The kernel cache key of this kernel compiled with GpuOptions `gpu`."""
        from . import cache
        return cache.key_of(self.key_ingredients(gpu))

    @property
    def cache_key(self):
        return self.key()

    def binary(self, gpu=None):
        """The cubin, PTX and launch needs for GpuOptions `gpu` (memory, disk cache or compile)."""
        from . import cache
        return cache.get_binary(self, gpu)

    def run(self, grid, *args):
        """Runs the kernel over `grid` on the run-time arguments (numpy arrays, numbers)."""
        return runtime.launch(self, grid, list(args))

    def __repr__(self):
        return f"<CompiledKernel {self.name} {self.specialization}>"


class JITFunction:
    def __init__(self, fn, options=None):
        self.fn = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.options = options or CompileOptions()
        self.signature = inspect.signature(fn)
        self.constexprs = {n for n, p in self.signature.parameters.items()
                           if p.annotation is tl.constexpr or p.annotation == "tl.constexpr"}
        self._source = None
        self.cache = {}

    @property
    def source(self):
        if self._source is None:
            try:
                self._source = FunctionSource(self.fn)
            except (OSError, TypeError) as e:
                raise CompilationError(f"cannot read the source of {self.__name__} ({e}): "
                                       "@tessel.jit functions must be defined in a file") from None
        return self._source

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.__name__} is a @tessel.jit function: launch it with "
                           f"{self.__name__}[grid](...) or call it from another kernel")

    def __getitem__(self, grid):
        def launcher(*args, **kwargs):
            kernel, runtime_args = self.specialize(*args, **kwargs)
            g = grid(kwargs) if callable(grid) else grid
            kernel.run(g, *runtime_args)
            return kernel
        return launcher

    def _bind(self, args, kwargs):
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self.__name__}(): {e}") from None
        bound.apply_defaults()
        return bound.arguments

    def specialize(self, *args, **kwargs):
        """The CompiledKernel for these arguments, and the run-time arguments in order."""
        bound = self._bind(args, kwargs)
        key, params, runtime_args = [], [], []
        for name, value in bound.items():
            if name in self.constexprs:
                try:
                    hash(value)
                except TypeError:
                    raise TypeError(f"{self.__name__}(): constexpr '{name}' must be hashable, "
                                    f"got {type(value).__name__}") from None
                key.append((name, "constexpr", type(value).__name__, value))
            else:
                kind, dtype = runtime.classify(name, value)
                key.append((name, kind, dtype))
                params.append((name, kind, dtype))
                runtime_args.append(value)
        key = tuple(key)
        kernel = self.cache.get(key)
        if kernel is None:
            kernel = self.compile(key, bound, params)
            self.cache[key] = kernel
        return kernel, runtime_args

    def compile(self, key, bound, params):
        from . import _tessel
        builder = _tessel.KernelBuilder()
        source = self.source
        if source.tree.decorator_list:
            pos = source.position(source.tree)
        else:
            pos = source.position(source.tree)
        builder.set_loc(*pos)
        try:
            values = builder.begin_function(self.__name__, [(k, d) for _, k, d in params])
        except ValueError as e:
            raise CompilationError(str(e), *pos) from None
        env = {}
        it = iter(values)
        for name, value in bound.items():
            env[name] = value if name in self.constexprs else TVal(next(it))
        gen = CodeGenerator(builder, source, env)
        try:
            gen.run_body(source.tree.body)
        except _Return:
            if gen.returned is not None:
                raise gen.error(gen.return_node, "a kernel cannot return a value; store it") from None
        builder.set_loc(*pos)
        builder.end_function()
        _raise_diagnostics(builder.verify(), pos)
        asm = {"tile": builder.print()}
        diags = builder.run_pipeline(self.options.pipeline, _dump_ir())
        _raise_diagnostics(diags, pos)
        asm["tile-opt"] = builder.print()
        kernel = CompiledKernel(self.__name__, builder, params, asm, key, self.options)
        kernel.warnings = [d for d in diags if d[0] != "error"]
        return kernel

    def warmup(self, *args, **kwargs):
        return self.specialize(*args, **kwargs)[0]


def _raise_diagnostics(diags, pos):
    errors = [d for d in diags if d[0] == "error"]
    if not errors:
        return
    severity, message, filename, line, col = errors[0]
    if not filename:
        filename, line, col = pos
    raise CompilationError(message, filename, line, col)


def jit(fn=None, *, options=None):
    """Decorator: make a function a tessel kernel (or a function callable from kernels)."""
    if fn is None:
        return lambda f: JITFunction(f, options)
    return JITFunction(fn, options)
