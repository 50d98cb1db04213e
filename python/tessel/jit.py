"""@tessel.jit: specialise a DSL function for its arguments, compile it, launch it.

A JITFunction is called as ``kernel[grid](*args, **constexprs)``. The specialisation key is the
argument signature (element types of array arguments, types of scalars) plus the values of the
tl.constexpr parameters; each key is traced into tile IR, verified, optimised with the pipeline
named in the CompileOptions, and cached in memory. A trace also depends on the globals and
closure variables it read (``CompiledKernel.guards``): a key holds one trace per set of their
values, so changing such a global after the first call retraces instead of reusing a stale
kernel (docs/dsl-decisions.md). ``CompiledKernel.asm`` keeps the IR
after the front end ("tile") and after the pipeline ("tile-opt").

Where it runs follows the arguments (tessel/gpu.py): numpy arrays on the CPU interpreter, CUDA
tensors and tessel.DevicePointer on the GPU.

The launch path is built for a cache hit to cost well under a microsecond above the driver
(docs/dev/launch.md). JITFunction subclasses the C type ``tessel._tessel.Dispatcher``:
``kernel[grid]`` is a small C object whose call binds the arguments to the kernel's parameters,
computes the specialisation key — per run-time argument its type plus its ``dtype`` for array
types (numpy arrays, device pointers, torch tensors), per constexpr its type and value — finds
the entry of that key and runs it: for the GPU the C++ ``Launcher`` directly (packing, pointer
checks, cuLaunchKernel), for the interpreter a Python function. No Python bytecode runs on a GPU
cache hit. A miss (or a call the C side cannot bind simply) goes the slow way (``_slow``: bind,
classify, trace, compile through the kernel cache, make the launcher), which remembers the entry
(``_remember``) for the next call.
"""
import dataclasses
import hashlib
import inspect
import os
import sys

from . import _tessel
from . import capture
from . import gpu
from . import language as tl
from . import runtime
from . import timing
from .errors import CompilationError
from .frontend import CodeGenerator, FunctionSource, TVal, _Return


# Warps per program CompileOptions.num_warps takes: powers of two up to a CTA of 1024 threads.
WARPS = (1, 2, 4, 8, 16, 32)


# CompileOptions' switches that set the GpuOptions field of the same name where not None.
_GPU_SWITCHES = ("occupancy_hints", "producer_once", "tma_producer", "tma_only", "pipeline_tiles",
                 "late_p", "rescale_under_s", "fp8_overlap", "vector_stores", "spill_fallbacks")


@dataclasses.dataclass(frozen=True)
class CompileOptions:
    """How a kernel is compiled: ``@tessel.jit(options=CompileOptions(...))``.

    Frozen; every field that changes code feeds the cache key. ``num_warps`` and ``num_stages``
    are Triton's launch options: they shape the :class:`tessel.GpuOptions` a GPU launch compiles
    with (:meth:`gpu_options`) and reach the cache key there, as ``gpu.num_threads`` and
    ``gpu.num_stages``. The interpreter ignores them.

    Raises:
        ValueError: an unknown backend, num_warps other than 1, 2, 4, 8, 16 or 32,
            num_stages other than 2, 3 or 4, or an occupancy_spill_bytes outside [0, 1024].
        TypeError: an occupancy_hints, producer_once, tma_producer, tma_only, pipeline_tiles,
            late_p, rescale_under_s, fp8_overlap, vector_stores or spill_fallbacks that is
            neither None nor a bool; a do_not_specialize that is not a name or a sequence of
            names.
    """

    #: The pass pipeline run on the tile IR after the front end.
    pipeline: str = dataclasses.field(default="tile-optimize", metadata={"code": True})
    #: Where a kernel runs, not what it compiles to (the GPU cache key leaves it out). "auto":
    #: where the arguments are (numpy: interpreter; CUDA tensors, DevicePointer: GPU);
    #: "interpreter" or "gpu" refuse the other kind of argument.
    backend: str = dataclasses.field(default="auto", metadata={"code": False})
    #: Warps per program of the reference lowering, which runs ``32 * num_warps`` threads
    #: (``GpuOptions.num_threads``); None keeps GpuOptions' 128. The fast paths choose their
    #: warps from the tile layouts and ignore it. Keyed as the GpuOptions field it sets.
    num_warps: int | None = dataclasses.field(default=None, metadata={"code": False})
    #: Stages of the fast paths' ring of loop-body loads, 2 to 4 (``GpuOptions.num_stages``);
    #: None keeps GpuOptions' 2. Keyed as the GpuOptions field it sets.
    num_stages: int | None = dataclasses.field(default=None, metadata={"code": False})
    #: Whether ptxas is asked again for the occupancy the shared memory allows where registers
    #: limit the CTAs per SM (``GpuOptions.occupancy_hints``); None keeps GpuOptions' default
    #: (on). Keyed as the GpuOptions field it sets.
    occupancy_hints: bool | None = dataclasses.field(default=None, metadata={"code": False})
    #: Bytes of spill the occupancy hint may add and still be kept
    #: (``GpuOptions.occupancy_spill_bytes``); None keeps GpuOptions' 0. Keyed as the GpuOptions
    #: field it sets.
    occupancy_spill_bytes: int | None = dataclasses.field(default=None, metadata={"code": False})
    #: Whether the producer warpgroup of a warp-specialized persistent kernel copies the
    #: blocks loaded once a tile (Q) too, into two buffers (``GpuOptions.producer_once``);
    #: None keeps GpuOptions' default (off). Keyed as the GpuOptions field it sets.
    producer_once: bool | None = dataclasses.field(default=None, metadata={"code": False})
    #: Whether such a producer copies through TMA (``GpuOptions.tma_producer``); None keeps
    #: GpuOptions' default (on). Keyed as the GpuOptions field it sets.
    tma_producer: bool | None = dataclasses.field(default=None, metadata={"code": False})
    #: Whether its TMA copies skip the run-time check of what TMA needs and the cp.async copy
    #: beside it: for kernels whose callers pass 16-byte aligned tensors with 16-byte aligned
    #: row strides (``GpuOptions.tma_only``; tessel.attention's kernels); None keeps
    #: GpuOptions' default (off). Keyed as the GpuOptions field it sets.
    tma_only: bool | None = dataclasses.field(default=None, metadata={"code": False})
    #: Whether a persistent kernel whose producer copies Q issues each tile's first Q·Kᵀ before
    #: the previous tile's epilogue (``GpuOptions.pipeline_tiles``); None keeps GpuOptions'
    #: default (off). Keyed as the GpuOptions field it sets.
    pipeline_tiles: bool | None = dataclasses.field(default=None, metadata={"code": False})
    #: Whether overlapped consumers short of registers make P after the previous P·V's wait
    #: (``GpuOptions.late_p``); None keeps GpuOptions' default (off). Keyed as the GpuOptions
    #: field it sets.
    late_p: bool | None = dataclasses.field(default=None, metadata={"code": False})
    #: Whether overlapped consumers rescale O beside the next S's wgmma
    #: (``GpuOptions.rescale_under_s``); None keeps GpuOptions' default (off). Keyed as the
    #: GpuOptions field it sets.
    rescale_under_s: bool | None = dataclasses.field(default=None, metadata={"code": False})
    #: Whether an FP8 kernel's consumers are overlapped too (``GpuOptions.fp8_overlap``); None
    #: keeps GpuOptions' default (off). Keyed as the GpuOptions field it sets.
    fp8_overlap: bool | None = dataclasses.field(default=None, metadata={"code": False})
    #: Whether the fast paths store 16-bit accumulator tiles 16 bytes a thread
    #: (``GpuOptions.vector_stores``); None keeps GpuOptions' default (on). Keyed as the
    #: GpuOptions field it sets.
    vector_stores: bool | None = dataclasses.field(default=None, metadata={"code": False})
    #: Whether a compile that spills is compiled again with the register-hungry switches given
    #: up (``GpuOptions.spill_fallbacks``); None keeps GpuOptions' default (on). Keyed as the
    #: GpuOptions field it sets.
    spill_fallbacks: bool | None = dataclasses.field(default=None, metadata={"code": False})
    #: Names of float parameters keyed by their type alone, not by their range (Triton's
    #: ``do_not_specialize``): no ``tile.moderate`` fold, one kernel for every value. For
    #: kernels where the fold costs more than it gives (it spills). Changes the traced code.
    do_not_specialize: tuple = dataclasses.field(default=(), metadata={"code": True})

    def __post_init__(self):
        if self.backend not in ("auto", "interpreter", "gpu"):
            raise ValueError(f"unknown backend '{self.backend}' (auto, interpreter or gpu)")
        if self.num_warps is not None and (isinstance(self.num_warps, bool)
                                           or self.num_warps not in WARPS):
            raise ValueError(f"num_warps must be 1, 2, 4, 8, 16 or 32, got {self.num_warps!r}")
        if self.num_stages is not None and (isinstance(self.num_stages, bool)
                                            or self.num_stages not in (2, 3, 4)):
            raise ValueError(f"num_stages must be 2, 3 or 4, got {self.num_stages!r}")
        if self.occupancy_spill_bytes is not None:
            from .cache import check_spill_bytes
            check_spill_bytes(self.occupancy_spill_bytes)
        for name in _GPU_SWITCHES:
            value = getattr(self, name)
            if value is not None and not isinstance(value, bool):
                raise TypeError(f"{name} must be a bool, got {value!r}")
        names = self.do_not_specialize
        if isinstance(names, str):
            names = (names,)
        if not isinstance(names, (tuple, list)) or not all(isinstance(n, str) for n in names):
            raise TypeError(f"do_not_specialize must be parameter names, got {names!r}")
        object.__setattr__(self, "do_not_specialize", tuple(names))

    def gpu_options(self, chip="sm_90a"):
        """The :class:`tessel.GpuOptions` a launch on ``chip`` compiles with: its defaults
        (``codegen="auto"``), with ``num_threads`` and ``num_stages`` from ``num_warps`` and
        ``num_stages``, ``occupancy_spill_bytes``, and the switches (``occupancy_hints``,
        ``producer_once``, ``tma_producer``, ``tma_only``, ``pipeline_tiles``, ``late_p``,
        ``rescale_under_s``, ``fp8_overlap``, ``vector_stores``, ``spill_fallbacks``) where they
        are set.

        Args:
            chip: "sm_80" or "sm_90a".

        Returns:
            tessel.GpuOptions: the options.
        """
        from . import cache
        fields = {"chip": chip}
        if self.num_warps is not None:
            fields["num_threads"] = 32 * self.num_warps
        if self.num_stages is not None:
            fields["num_stages"] = self.num_stages
        if self.occupancy_spill_bytes is not None:
            fields["occupancy_spill_bytes"] = self.occupancy_spill_bytes
        for name in _GPU_SWITCHES:
            if getattr(self, name) is not None:
                fields[name] = getattr(self, name)
        return cache.GpuOptions(**fields)

    def digest(self):
        """SHA-256 of every field (hex)."""
        fields = sorted(dataclasses.asdict(self).items())
        return hashlib.sha256(repr(fields).encode()).hexdigest()


def _explain():
    """TESSEL_EXPLAIN=1: print the passes' remarks (what the mask analysis classified, which
    lowering took the kernel) as each specialisation is compiled."""
    return os.environ.get("TESSEL_EXPLAIN", "") not in ("", "0")


def _dump_ir():
    return os.environ.get("TESSEL_DUMP_IR", "") not in ("", "0")


class CompiledKernel:
    """One specialisation of a kernel: its IR, its signature and a way to run it.

    What :meth:`JITFunction.warmup` and :func:`tessel.compile_attention` return.

    Attributes:
        name: the kernel's name.
        params: ``[(name, kind, dtype)]`` of the run-time parameters.
        asm: the IR as text: ``{"tile": after the front end, "tile-opt": after the pipeline}``.
        specialization: the specialisation key (argument types and constexpr values).
        options: the :class:`CompileOptions`.
        guards: the globals and closure values the trace read (a change retraces).
    """

    def __init__(self, name, builder, params, asm, key, options):
        self.name = name
        self._builder = builder
        self.params = params          # [(name, kind, dtype)] of the run-time parameters
        self.asm = asm                # {"tile": ..., "tile-opt": ...}
        self.specialization = key
        self.options = options
        self.timings = []             # [(step, seconds)] of the front end (tessel/timing.py)
        self.guards = ()              # [(globals dict | cell, name | None, value)] it read
        # [(container, name, copy)] of the guarded values that change in place (lists, dicts,
        # sets): compared by contents at each call, which therefore goes the slow way.
        self.contents = ()
        self.captures = ()            # [capture.Capture] of the tensors it captured, in order

    def key_ingredients(self, gpu=None):
        """What the GPU cache key of this kernel is made of (docs/cache.md).

        Args:
            gpu: a :class:`tessel.GpuOptions` (default: ``options.gpu_options()``, sm_90a).

        Returns:
            dict: the key's ingredients, by name.
        """
        from . import cache
        return cache.ingredients(self, gpu or self.options.gpu_options())

    def key(self, gpu=None):
        """The kernel cache key (SHA-256, hex) of this kernel compiled with ``gpu``, a
        :class:`tessel.GpuOptions` (default: ``options.gpu_options()``)."""
        from . import cache
        return cache.key_of(self.key_ingredients(gpu))

    @property
    def cache_key(self):
        """The kernel cache key with the :class:`tessel.GpuOptions` of ``options.gpu_options()``."""
        return self.key()

    def binary(self, gpu=None):
        """The compiled GPU binary, from memory, the disk cache or a compile.

        Args:
            gpu: a :class:`tessel.GpuOptions`, taken as it is (default:
                ``options.gpu_options()``: sm_90a, with the kernel's num_warps and num_stages).

        Returns:
            tessel.cache.GpuBinary: the cubin, PTX and what a launch needs.

        Raises:
            tessel.CompilationError: the GPU compile failed.
        """
        from . import cache
        return cache.get_binary(self, gpu or self.options.gpu_options())

    def run(self, grid, *args):
        """Runs the kernel over ``grid`` on the run-time arguments.

        numpy arrays and numbers run on the interpreter, CUDA tensors and DevicePointer on the
        GPU. This is the slow path: for repeated launches use ``kernel[grid](...)``, whose cache
        hits skip all of this.

        Args:
            grid: the number of programs along each axis, a tuple of 1 to 3 ints.
            *args: the run-time arguments, in the order of ``params``.

        Raises:
            tessel.KernelRuntimeError: the interpreter stopped the kernel.
        """
        if runtime.placement(self.params, args) == "cuda":
            return self.gpu_launcher(runtime.device_of_args(args)).launch(
                grid, gpu.stream_source(), *args)
        return runtime.launch(self, grid, list(args))

    def gpu_launcher(self, device=0, gpu_options=None):
        """The launcher (``tessel._tessel.Launcher``) of this kernel for a CUDA device;
        compiles on first use.

        Args:
            device: the CUDA device ordinal.
            gpu_options: a :class:`tessel.GpuOptions`; by default
                ``options.gpu_options(chip)`` for the device's chip (``codegen="auto"``, the
                kernel's num_warps and num_stages).
        """
        options = gpu_options or self.options.gpu_options(gpu.chip_of(device))
        return gpu.launcher(self.binary(options), self.params)

    def __repr__(self):
        return f"<CompiledKernel {self.name} {self.specialization}>"


class JITFunction(_tessel.Dispatcher):
    """A function decorated with :func:`jit`: launched as ``kernel[grid](*args, **constexprs)``.

    ``grid`` is an int, a tuple of 1 to 3 ints, or a callable taking the dict of every argument
    by name (constexprs included) and returning one. Array arguments are numpy arrays (the CPU
    interpreter) or CUDA torch tensors / :class:`tessel.DevicePointer` (the GPU); parameters
    annotated ``tl.constexpr`` are compile-time values. Each new specialisation is traced,
    compiled and cached. Called directly, a JITFunction raises; other kernels inline it.

    Raises:
        tessel.CompilationError: the kernel does not compile, located in its source.
        tessel.KernelRuntimeError: the interpreter stopped the kernel.
    """

    def __init__(self, fn, options=None):
        self.fn = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.options = options or CompileOptions()
        self.signature = inspect.signature(fn)
        self.constexprs = {n for n, p in self.signature.parameters.items()
                           if p.annotation is tl.constexpr or p.annotation == "tl.constexpr"}
        params = self.signature.parameters
        for name in self.options.do_not_specialize:
            if name not in params or name in self.constexprs:
                raise ValueError(f"{self.__name__}: do_not_specialize names "
                                 f"{'a constexpr' if name in params else 'no parameter'} "
                                 f"'{name}' (it takes run-time parameter names)")
        self._source = None
        # with_options variants share the kernel they were made from (its parsed source) and
        # one table of every variant by its CompileOptions.
        self._origin = self
        self._variants = {self.options: self}
        self.cache = {}
        self._configure(self._dispatch_params())
        # kernel._runner(grid, *args, **kwargs) is kernel[grid](*args, **kwargs) without the
        # bound-grid object (tessel.attention calls it).
        self._runner = self._call

    @property
    def source(self):
        origin = self._origin
        if origin._source is None:
            try:
                origin._source = FunctionSource(self.fn)
            except (OSError, TypeError) as e:
                raise CompilationError(f"cannot read the source of {self.__name__} ({e}): "
                                       "@tessel.jit functions must be defined in a file") from None
        return origin._source

    def with_options(self, **changes):
        """This kernel with other :class:`CompileOptions` fields, e.g.
        ``kernel.with_options(num_warps=8, num_stages=3)[grid](...)``.

        The variant shares this kernel's parsed source and has its own specialisations and
        launch table; asking again for the same options returns the same variant, so calling
        it in a loop traces and compiles once.

        Args:
            **changes: CompileOptions fields (``num_warps``, ``num_stages``, ``pipeline``,
                ``backend``).

        Returns:
            JITFunction: the variant (this kernel itself when nothing changes).

        Raises:
            TypeError: a name that is not a CompileOptions field.
            ValueError: a bad value (as CompileOptions raises).
        """
        names = {f.name for f in dataclasses.fields(CompileOptions)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise TypeError(f"{self.__name__}.with_options(): unknown option "
                            f"{', '.join(map(repr, unknown))} (the options: "
                            f"{', '.join(sorted(names))})")
        options = dataclasses.replace(self.options, **changes)
        variant = self._variants.get(options)
        if variant is None:
            variant = type(self)(self.fn, options)
            variant._origin = self._origin
            variant._variants = self._variants
            self._variants[options] = variant
        return variant

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.__name__} is a @tessel.jit function: launch it with "
                           f"{self.__name__}[grid](...) or call it from another kernel")

    # kernel[grid](*args, **kwargs): grid is an int, a tuple of 1 to 3 ints, or a callable taking
    # the dict of every argument by name (constexprs included) and returning one. The indexing is
    # the C Dispatcher's (module docstring).

    def _dispatch_params(self):
        """What the C dispatcher binds calls with: [(name, is_constexpr, kind, has_default,
        default)]; None for a signature with *args or **kwargs (always the slow way)."""
        P = inspect.Parameter
        params = list(self.signature.parameters.values())
        if any(p.kind in (P.VAR_POSITIONAL, P.VAR_KEYWORD) for p in params):
            return None
        kinds = {P.POSITIONAL_ONLY: "positional_only", P.KEYWORD_ONLY: "keyword_only",
                 P.POSITIONAL_OR_KEYWORD: "positional"}
        return [(p.name, p.name in self.constexprs, kinds[p.kind], p.default is not P.empty,
                 None if p.default is P.empty else p.default) for p in params]

    def _slow(self, grid, fast_key, /, *args, **kwargs):
        """A call the C dispatcher did not find (or could not bind simply): bind, specialise,
        compile, make the launch entry, remember it under the call's key, launch. `fast_key` is
        unused (None)."""
        bound = self._bind(args, kwargs)
        # Array types key by their dtype: learn a type (a torch tensor on the first call, a
        # subclass) before the entry is remembered, so that its key has the dtype in it.
        for name, value in bound.items():
            if name not in self.constexprs and runtime.is_array(value):
                runtime.add_array_type(type(value))
        kernel, runtime_args = self.specialize(*args, **kwargs)
        if kernel.captures or kernel.contents:
            # Captured tensors are read anew at every call (from the function passed with this
            # call, for a score_mod/mask_mod), and a list the trace read is compared by its
            # contents (the C table checks identity): never a C table entry, always this way.
            return self._launch(kernel, grid, bound, runtime_args)
        where = runtime.placement(kernel.params, runtime_args)
        backend = self.options.backend
        if backend != "auto" and where is not None and backend != {"cuda": "gpu"}.get(where, "interpreter"):
            raise TypeError(f"{self.__name__} is compiled with backend='{backend}' but was given "
                            f"{'device' if where == 'cuda' else 'host'} arrays")
        if where == "cuda" or (where is None and backend == "gpu"):
            device = runtime.device_of_args(runtime_args)
            entry = kernel.gpu_launcher(device)
            stream = gpu.stream_source()
            self._remember(entry, stream, kernel.guards, *args, **kwargs)
            g = grid(dict(bound)) if callable(grid) else grid
            return entry.launch(g, stream, *runtime_args)

        def entry(g, _stream, *a, _kernel=kernel):
            return _kernel.run(g, *a)
        self._remember(entry, 0, kernel.guards, *args, **kwargs)
        g = grid(dict(bound)) if callable(grid) else grid
        return entry(g, 0, *runtime_args)

    def _launch(self, kernel, grid, bound, runtime_args):
        g = grid(dict(bound)) if callable(grid) else grid
        where = runtime.placement(kernel.params, runtime_args)
        if where == "cuda":
            device = runtime.device_of_args(runtime_args)
            launchers = kernel.__dict__.setdefault("_launchers", {})   # per device, per kernel
            entry = launchers.get(device)
            if entry is None:
                entry = launchers[device] = kernel.gpu_launcher(device)
            return entry.launch(g, gpu.stream_source(), *runtime_args)
        return kernel.run(g, *runtime_args)

    def _bind(self, args, kwargs):
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self.__name__}(): {e}") from None
        bound.apply_defaults()
        return bound.arguments

    def specialize(self, *args, **kwargs):
        """The CompiledKernel for these arguments, and the run-time arguments in order.

        Returns:
            tuple: ``(CompiledKernel, [run-time arguments])``.
        """
        bound = self._bind(args, kwargs)
        key, params, runtime_args = [], [], []
        for name, value in bound.items():
            if name in self.constexprs:
                try:
                    hash(value)
                except TypeError:
                    raise TypeError(f"{self.__name__}(): constexpr '{name}' must be hashable, "
                                    f"got {type(value).__name__}") from None
                if getattr(value, "user_fn", None) is not None:
                    value = value.bound_to(None)   # a ModFunction: its user_fn holds tensors
                key.append((name, "constexpr", type(value).__name__, value))
            else:
                kind, dtype = runtime.classify(name, value)
                # A float scalar is specialised on its range too: a moderate one (positive,
                # 2^-64..2^64) lets the kernel fold it without run-time checks.
                key.append((name, kind, dtype, "any" if name in self.options.do_not_specialize
                            else runtime.float_range(value))
                           if kind == "scalar" and dtype == "f32" else (name, kind, dtype))
                params.append((name, kind, dtype))
                runtime_args.append(value)
        key = tuple(key)
        # One key may hold several traces: each records the globals (and closure variables)
        # it read and their values (kernel.guards), and the signatures of the tensors it
        # captured; the first whose guards hold and whose captures match is used.
        constexprs = [v for n, v in bound.items() if n in self.constexprs]
        kernels = self.cache.setdefault(key, [])
        kernel, values = None, None
        for k in kernels:
            if _guards_hold(k.guards) and _contents_hold(k.contents):
                values = capture.resolve(k.captures, constexprs) if k.captures else []
                if values is not None:
                    kernel = k
                    break
        if kernel is None:
            kernel = self.compile(key, bound, params)
            kernels.append(kernel)
            values = capture.resolve(kernel.captures, constexprs)
            if values is None:
                raise RuntimeError(f"{self.__name__}: a captured tensor changed while the "
                                   "kernel was traced")
        if kernel.captures:
            device = runtime.device_of_args(runtime_args) \
                if runtime.placement(params, runtime_args) == "cuda" else None
            runtime_args += capture.launch_args(kernel.captures, values, device)
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
        for index, item in enumerate(i for i in key if i[1] != "constexpr"):
            if item[-1] == "moderate":
                builder.mark_moderate(index)
        env = {}
        it = iter(values)
        for name, value in bound.items():
            env[name] = value if name in self.constexprs else TVal(next(it))
        gen = CodeGenerator(builder, source, env, guards={}, owner=self)
        try:
            gen.run_body(source.tree.body)
        except _Return:
            if gen.returned is not None:
                raise gen.error(gen.return_node, "a kernel cannot return a value; store it") from None
        except RecursionError:
            # The expression depth is bounded (frontend.MAX_EXPRESSION_DEPTH); this is the net
            # for what else nests (statements, inlined calls): a located error, not a traceback.
            raise gen.error(gen.node, "the kernel nests too deeply to trace (statements, calls "
                                      "or expressions): simplify it") from None
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
        captures = [c for c, _ in gen.captures.values()]
        params = list(params) + [p for c in captures for p in c.params()]
        kernel = CompiledKernel(self.__name__, builder, params, asm, key, self.options)
        kernel.captures = tuple(captures)
        kernel.warnings = [d for d in diags if d[0] != "error"]
        if _explain():
            for severity, message, filename, line, col in kernel.warnings:
                print(f"{filename}:{line}:{col}: {severity}: {message}", file=sys.stderr)
        kernel.guards = tuple(gen.guards.values())
        kernel.contents = tuple((c, n, copy) for c, n, v in kernel.guards
                                for copy in [_contents(v)] if copy is not _IMMUTABLE)
        kernel.timings = clock.steps
        return kernel

    def warmup(self, *args, **kwargs):
        """Compiles the specialisation these arguments select, without running it.

        Args:
            *args: the arguments, as in a launch.
            **kwargs: the arguments by name (constexprs included).

        Returns:
            CompiledKernel: the specialisation.
        """
        return self.specialize(*args, **kwargs)[0]


_MISSING = object()


def _current(container, name):
    if name is None:
        try:
            return container.cell_contents
        except ValueError:
            return _MISSING
    return container.get(name, _MISSING)


def _guards_hold(guards):
    """Whether every global / closure value a trace read is still the same (identity, else
    equality of values of the same type; an array or other value without a plain == differs)."""
    for container, name, value in guards:
        now = _current(container, name)
        if now is value:
            continue
        if type(now) is not type(value):
            return False
        try:
            if not bool(now == value):
                return False
        except Exception:
            return False
    return True


_IMMUTABLE = object()
_MUTABLE = (list, dict, set, bytearray)


def _contents(value):
    """A copy of a guarded value that can change in place (a list, dict, set or bytearray, or a
    tuple holding one), to compare the value with at later calls; _IMMUTABLE for others (their
    identity or equality is the guard). A trace reads such a value as a constant, so a write
    into it must retrace, not run the old kernel."""
    def mutable(v, depth=0):
        return isinstance(v, _MUTABLE) or (type(v) is tuple and depth < 8 and
                                           any(mutable(x, depth + 1) for x in v))
    if not mutable(value):
        return _IMMUTABLE
    import copy
    try:
        return copy.deepcopy(value)
    except Exception:                   # (contents that cannot be copied: never equal)
        return object()


def _contents_hold(contents):
    """Whether every in-place-changeable value a trace read holds what it held then."""
    for container, name, was in contents:
        try:
            if not bool(_current(container, name) == was):
                return False
        except Exception:
            return False
    return True


def _raise_diagnostics(diags, pos):
    errors = [d for d in diags if d[0] == "error"]
    if not errors:
        return
    severity, message, filename, line, col = errors[0]
    if not filename:
        filename, line, col = pos
    raise CompilationError(message, filename, line, col)


def jit(fn=None, *, options=None, num_warps=None, num_stages=None, do_not_specialize=None):
    """Decorator: makes a function a tessel kernel, or a function kernels call (inlined).

    ``@tessel.jit``, ``@tessel.jit(num_warps=4, num_stages=3)`` or
    ``@tessel.jit(options=CompileOptions(...))``. The function is written in the tile language
    (:mod:`tessel.language`, imported as ``tl``); it is traced when first launched with new
    argument types or constexpr values.

    Args:
        fn: the function.
        options: a :class:`CompileOptions` (default: its defaults).
        num_warps: sets ``CompileOptions.num_warps``: the reference lowering's warps per
            program (the fast paths choose their own from the tile layouts).
        num_stages: sets ``CompileOptions.num_stages``: the fast paths' load ring, 2 to 4.
        do_not_specialize: sets ``CompileOptions.do_not_specialize``: float parameters keyed
            by their type alone, not by their range (no scale fold).

    Returns:
        JITFunction: the kernel (or a decorator taking the function, when ``fn`` is None).

    Raises:
        ValueError: a bad num_warps or num_stages (as :class:`CompileOptions` raises); a
            do_not_specialize name that is not a run-time parameter.
    """
    options = options or CompileOptions()
    launch = {k: v for k, v in (("num_warps", num_warps), ("num_stages", num_stages),
                                ("do_not_specialize", do_not_specialize)) if v is not None}
    if launch:
        options = dataclasses.replace(options, **launch)
    if fn is None:
        return lambda f: JITFunction(f, options)
    return JITFunction(fn, options)
