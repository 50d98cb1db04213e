"""@tessel.jit: specialise a DSL function for its arguments, compile it, launch it.

A JITFunction is called as ``kernel[grid](*args, **constexprs)``. The specialisation key is the
argument signature (element types of array arguments, types of scalars) plus the values of the
tl.constexpr parameters; each key is traced once into tile IR, verified, optimised with the
pipeline named in the CompileOptions, and cached in memory. ``CompiledKernel.asm`` keeps the IR
after the front end ("tile") and after the pipeline ("tile-opt").

Where it runs follows the arguments (tessel/gpu.py): numpy arrays on the CPU interpreter, CUDA
tensors and tessel.DevicePointer on the GPU.

The launch path is built for a cache hit to cost microseconds. Each JITFunction generates (once,
with ``exec``) a Python function with the kernel's own parameters, so Python itself binds the
call; it builds a cheap key — per run-time argument its ``dtype`` (arrays, tensors, device
pointers) or its type (scalars), per constexpr its type and value — and looks it up in a dict
whose values are launch callables: for the GPU the C++ ``Launcher.launch`` builtin directly, for
the interpreter a Python function. A miss goes the slow way (``_slow``: bind, classify, trace,
compile through the kernel cache, make the launcher) and fills the dict.
"""
import ast
import dataclasses
import functools
import hashlib
import inspect
import os

from . import gpu
from . import language as tl
from . import runtime
from . import timing
from .errors import CompilationError
from .frontend import CodeGenerator, FunctionSource, TVal, _Return

VERSION = "0.1.0"


@dataclasses.dataclass(frozen=True)
class CompileOptions:
    """Every option that changes the generated code. Frozen: its hash feeds the cache key."""

    pipeline: str = dataclasses.field(default="tile-optimize", metadata={"code": True})
    # Where a kernel runs, not what it compiles to: the GPU cache key leaves it out. "auto":
    # where the arguments are (numpy: interpreter; CUDA tensors, DevicePointer: GPU);
    # "interpreter" or "gpu" refuse the other kind of argument.
    backend: str = dataclasses.field(default="auto", metadata={"code": False})

    def __post_init__(self):
        if self.backend not in ("auto", "interpreter", "gpu"):
            raise ValueError(f"unknown backend '{self.backend}' (auto, interpreter or gpu)")

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
        self.timings = []             # [(step, seconds)] of the front end (tessel/timing.py)

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
        """Runs the kernel over `grid` on the run-time arguments: numpy arrays and numbers on
        the interpreter, CUDA tensors / DevicePointer on the GPU (the slow path: for repeated
        launches use kernel[grid](...), whose cache hits skip all of this)."""
        if runtime.placement(self.params, args) == "cuda":
            return self.gpu_launcher(runtime.device_of_args(args)).launch(
                grid, gpu.stream_source(), *args)
        return runtime.launch(self, grid, list(args))

    def gpu_launcher(self, device=0, gpu_options=None):
        """The tessel._tessel.Launcher of this kernel for CUDA device `device` (the chip from the
        device, codegen auto unless `gpu_options` says otherwise); compiles on first use."""
        from . import cache
        options = gpu_options or cache.GpuOptions(chip=gpu.chip_of(device))
        return gpu.launcher(self.binary(options), self.params)

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
        self._fast = {}          # cheap key -> launch callable (see the module docstring)
        self._runner_globals = {"__tessel_stream": 0}
        self._runner = self._make_runner()

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
        """kernel[grid](*args, **kwargs): grid is an int, a tuple of 1 to 3 ints, or a callable
        taking the dict of every argument by name (constexprs included) and returning one."""
        if self._runner is not None:
            return functools.partial(self._runner, grid)
        return functools.partial(self._slow, grid, None)

    def _make_runner(self):
        """The generated launch function (module docstring); None for a signature with *args or
        **kwargs, which always goes the slow way."""
        params = list(self.signature.parameters.values())
        P = inspect.Parameter
        if any(p.kind in (P.VAR_POSITIONAL, P.VAR_KEYWORD) for p in params):
            return None
        names = [p.name for p in params]
        if any(n.startswith("__tessel_") for n in names):
            return None
        ns = {"__tessel_fast": self._fast, "__tessel_DT": runtime.ARRAY_TYPES,
              "__tessel_slow": self._slow, "__tessel_stream": 0}
        positional_only = [p for p in params if p.kind == P.POSITIONAL_ONLY]
        sig = ["__tessel_grid"]
        for i, p in enumerate(params):
            if p.kind == P.KEYWORD_ONLY and sig[-1] != "*" and "*" not in sig:
                if "/" not in sig:
                    sig.append("/")
                sig.append("*")
            text = p.name
            if p.default is not P.empty:
                ns[f"__tessel_d{i}"] = p.default
                text += f"=__tessel_d{i}"
            sig.append(text)
            if p.kind == P.POSITIONAL_ONLY and p is positional_only[-1]:
                sig.append("/")
        if "/" not in sig:
            sig.insert(1, "/")
        key = []
        for n in names:
            if n in self.constexprs:
                key += [f"type({n})", n]
            else:
                key.append(f"({n}.dtype if type({n}) in __tessel_DT else type({n}))")
        everything = "{" + ", ".join(f"{n!r}: {n}" for n in names) + "}"
        as_call = ", ".join(n if p.kind != P.KEYWORD_ONLY else f"{n}={n}"
                            for n, p in zip(names, params))
        runtime_args = ", ".join(n for n in names if n not in self.constexprs)
        fname = self.__name__ if self.__name__.isidentifier() else "kernel"
        code = (
            f"def {fname}({', '.join(sig)}):\n"
            f"    __tessel_k = ({', '.join(key)},)\n"
            f"    try:\n"
            f"        __tessel_e = __tessel_fast[__tessel_k]\n"
            f"    except (KeyError, TypeError):\n"
            f"        return __tessel_slow(__tessel_grid, __tessel_k, {as_call})\n"
            f"    if callable(__tessel_grid):\n"
            f"        __tessel_grid = __tessel_grid({everything})\n"
            f"    return __tessel_e(__tessel_grid, __tessel_stream, {runtime_args})\n")
        exec(compile(code, f"<tessel launcher of {self.__name__}>", "exec"), ns)
        self._runner_globals = ns
        self._runner_code = code
        return ns[fname]

    def _slow(self, grid, fast_key, /, *args, **kwargs):
        """A call whose cheap key missed: bind, specialise, compile, make the launch callable,
        remember it under the key (when the key is complete), launch."""
        bound = self._bind(args, kwargs)
        # A key with an array whose type was not yet known to carry a dtype (a torch tensor on
        # the first call, a subclass) lacks that dtype: learn the type, and let the next call
        # key it properly.
        complete = True
        for name, value in bound.items():
            if name not in self.constexprs and runtime.is_array(value) and (
                    type(value) not in runtime.ARRAY_TYPES):
                runtime.ARRAY_TYPES.add(type(value))
                complete = False
        kernel, runtime_args = self.specialize(*args, **kwargs)
        where = runtime.placement(kernel.params, runtime_args)
        backend = self.options.backend
        if backend != "auto" and where is not None and backend != {"cuda": "gpu"}.get(where, "interpreter"):
            raise TypeError(f"{self.__name__} is compiled with backend='{backend}' but was given "
                            f"{'device' if where == 'cuda' else 'host'} arrays")
        if where == "cuda" or (where is None and backend == "gpu"):
            device = runtime.device_of_args(runtime_args)
            entry = kernel.gpu_launcher(device).launch
            if gpu.torch_module() is not None:
                self._runner_globals["__tessel_stream"] = gpu.stream_source()
        else:
            def entry(g, _stream, *a, _kernel=kernel):
                return _kernel.run(g, *a)
        if fast_key is not None and complete:
            self._fast[fast_key] = entry
        g = grid(dict(bound)) if callable(grid) else grid
        return entry(g, gpu.stream_source() if where == "cuda" else 0, *runtime_args)

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
        clock = timing.Steps()
        builder = _tessel.KernelBuilder()
        clock.lap("mlir context")
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
        clock.lap("trace")
        _raise_diagnostics(builder.verify(), pos)
        clock.lap("verify")
        asm = {"tile": builder.print()}
        clock.lap("print tile ir")
        diags = builder.run_pipeline(self.options.pipeline, _dump_ir())
        _raise_diagnostics(diags, pos)
        clock.lap("tile pipeline")
        asm["tile-opt"] = builder.print()
        clock.lap("print tile-opt ir")
        kernel = CompiledKernel(self.__name__, builder, params, asm, key, self.options)
        kernel.warnings = [d for d in diags if d[0] != "error"]
        kernel.timings = clock.steps
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
