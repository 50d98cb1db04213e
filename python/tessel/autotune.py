"""tessel.autotune: choose a kernel's constexprs, num_warps and num_stages by timing them.

    @tessel.autotune(configs=[tessel.Config({"BM": 128, "BN": 128, "BK": 64}, num_stages=3),
                              tessel.Config({"BM": 64, "BN": 64, "BK": 64}, num_warps=4)],
                     key=["M", "N", "K"])
    @tessel.jit
    def matmul(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr): ...

    matmul[lambda meta: (tl_cdiv(meta["M"], meta["BM"]), tl_cdiv(meta["N"], meta["BN"]))](
        a, b, c, M, N, K)

A call's *tuning key* is the values of the ``key`` arguments, the kind and element type of every
run-time argument, and where it runs. The first call with a new tuning key chooses a config:

- on the GPU (CUDA tensors), every config is compiled (one that does not compile, or whose
  launch the driver refuses, is skipped and its reason kept), the rest are timed with CUDA
  events (``warmup_calls`` calls, then the median of ``timed_calls``; two rounds, the second in
  reverse order, the better median kept), and the fastest is kept
  in memory and on disk (``tuning_directory()``), so that another process skips the timing;
- on the interpreter (numpy arrays), nothing is timed: the first config that compiles is used.

Later calls with that tuning key launch the chosen variant directly. docs/dev/tile-programs.md
has the decisions (the disk record's key and format).
"""
import ast
import json
import logging
import os
import statistics
import sys
import tempfile
import time

from . import cache
from . import gpu
from . import runtime
from .errors import CompilationError
from .jit import CompileOptions, JITFunction

log = logging.getLogger("tessel.autotune")

# The version of the disk record's layout: a record of another version is a miss.
RECORD_FORMAT = 1
_MAX_RECORD_BYTES = 1 << 20


class Config:
    """One launch configuration for :func:`autotune`: constexpr values and launch options.

    Args:
        kwargs: ``{constexpr parameter name: value}`` passed to the kernel with each launch.
        num_warps: as ``CompileOptions.num_warps`` (None: the default).
        num_stages: as ``CompileOptions.num_stages`` (None: the default).

    Raises:
        TypeError: kwargs is not a mapping of names to hashable values.
        ValueError: a bad num_warps or num_stages (as :class:`tessel.CompileOptions` raises).
    """

    __slots__ = ("kwargs", "num_warps", "num_stages")

    def __init__(self, kwargs, num_warps=None, num_stages=None):
        try:
            kwargs = dict(kwargs)
            hash(tuple(kwargs.items()))
        except TypeError:
            raise TypeError(f"Config takes a dict of constexpr values, got {kwargs!r}") from None
        if not all(isinstance(k, str) for k in kwargs):
            raise TypeError(f"Config's keys are parameter names, got {list(kwargs)!r}")
        CompileOptions(num_warps=num_warps, num_stages=num_stages)     # checks them
        self.kwargs = kwargs
        self.num_warps = num_warps
        self.num_stages = num_stages

    def record(self):
        """The config as JSON data, the same in every process."""
        return {"kwargs": {k: cache.canonical_value(v) for k, v in sorted(self.kwargs.items())},
                "num_warps": self.num_warps, "num_stages": self.num_stages}

    def __eq__(self, other):
        return isinstance(other, Config) and self.record() == other.record()

    def __hash__(self):
        return hash(json.dumps(self.record(), sort_keys=True))

    def __repr__(self):
        items = [f"{k}={v!r}" for k, v in self.kwargs.items()]
        items += [f"{k}={getattr(self, k)}" for k in ("num_warps", "num_stages")
                  if getattr(self, k) is not None]
        return f"Config({', '.join(items)})"


class Autotuner:
    """A kernel under :func:`autotune`: launched as ``kernel[grid](*args, **kwargs)``.

    The call leaves out the constexprs the configs set; a callable ``grid`` gets the dict of
    every argument by name with the chosen config's values merged in (``meta["BM"]``).

    Attributes:
        fn: the :class:`tessel.JITFunction` tuned.
        configs: the :class:`Config` list, in the order given.
        key: the names of the arguments whose values select a choice.
        best_config: the config of the latest launch (None before the first).
        cache: ``{tuning key: index in configs}`` of the choices this process has made or read.
    """

    def __init__(self, fn, configs, key, reset_to_zero=None, warmup_calls=10, timed_calls=40,
                 verbose=None):
        if not isinstance(fn, JITFunction):
            raise TypeError("tessel.autotune decorates a @tessel.jit kernel: put @tessel.jit "
                            "below @tessel.autotune")
        configs = list(configs)
        if not configs or not all(isinstance(c, Config) for c in configs):
            raise ValueError("tessel.autotune needs a non-empty list of tessel.Config")
        params = list(fn.signature.parameters)
        for what, names in (("key", key), ("reset_to_zero", reset_to_zero or ())):
            unknown = [n for n in names if n not in params]
            if unknown:
                raise ValueError(f"tessel.autotune({what}=...): {fn.__name__} has no parameter "
                                 f"{', '.join(map(repr, unknown))}")
        for c in configs:
            bad = [n for n in c.kwargs if n not in fn.constexprs]
            if bad:
                raise ValueError(f"{c}: {', '.join(map(repr, bad))} is not a tl.constexpr "
                                 f"parameter of {fn.__name__}")
        constexpr_resets = [n for n in reset_to_zero or () if n in fn.constexprs]
        if constexpr_resets:
            raise ValueError(f"tessel.autotune(reset_to_zero=...): {constexpr_resets[0]!r} is a "
                             "constexpr, not an output")
        if warmup_calls < 0 or timed_calls < 1:
            raise ValueError("tessel.autotune needs warmup_calls >= 0 and timed_calls >= 1")
        self.fn = fn
        self.configs = configs
        self.key = list(key)
        self.reset_to_zero = list(reset_to_zero or ())
        self.warmup_calls = warmup_calls
        self.timed_calls = timed_calls
        self.verbose = verbose
        self.best_config = None
        self.cache = {}
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        # A config's num_warps / num_stages replace the kernel's own only where it sets them.
        self._variants = [fn.with_options(**{k: v for k, v in (("num_warps", c.num_warps),
                                                                ("num_stages", c.num_stages))
                                             if v is not None})
                          for c in configs]
        self._set_by_configs = {n for c in configs for n in c.kwargs}
        self._params = params
        self._defaults = {n: p.default for n, p in fn.signature.parameters.items()
                          if p.default is not p.empty}
        self._digests = None

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            return self.run(grid, *args, **kwargs)
        return launch

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.__name__} is an autotuned kernel: launch it with "
                           f"{self.__name__}[grid](...)")

    def run(self, grid, *args, **kwargs):
        """Launches the kernel over ``grid`` with the config chosen for these arguments,
        choosing one first when their tuning key is new (``kernel[grid](...)`` calls this).

        Raises:
            ValueError: the call sets a constexpr the configs set.
            tessel.CompilationError: no config compiles (or launches) for these arguments;
                the message lists each config's reason.
            RuntimeError: timing on the GPU needs torch (CUDA events), and it is not imported.
            TypeError: a reset_to_zero argument is not a torch tensor.
        """
        clash = self._set_by_configs.intersection(kwargs)
        if clash:
            raise ValueError(f"{self.__name__}: {', '.join(sorted(clash))} is set by the "
                             "autotuner's configs; leave it out of the call")
        values = self._bind(args, kwargs)
        tuning_key, place = self._tuning_key(values)
        index = self.cache.get(tuning_key)
        tuned = False
        if index is None:
            index, tuned = self._choose(tuning_key, place, grid, args, kwargs, values)
            self.cache[tuning_key] = index
        config = self.configs[index]
        self.best_config = config
        if tuned:
            self._reset(values)        # as every timed call saw it
        return self._variants[index][grid](*args, **kwargs, **config.kwargs)

    # --- the tuning key ------------------------------------------------------------------------

    def _bind(self, args, kwargs):
        if len(args) > len(self._params):
            raise TypeError(f"{self.__name__}(): takes {len(self._params)} arguments, "
                            f"got {len(args)}")
        values = dict(self._defaults)
        values.update(zip(self._params, args))
        values.update(kwargs)
        return values

    def _tuning_key(self, values):
        """(key, place): the key values, each run-time argument's (kind, dtype), and place:
        ("cuda", device) or ("host",)."""
        keyed = []
        for name in self.key:
            v = values.get(name)
            keyed.append(tuple(v.shape) if runtime.is_array(v) and hasattr(v, "shape") else v)
        signature, args = [], []
        for name in self._params:
            if name in self.fn.constexprs or name not in values:
                continue
            kind, dtype = runtime.classify(name, values[name])
            signature.append((name, kind, dtype))
            args.append(values[name])
        if runtime.placement(signature, args) == "cuda":
            place = ("cuda", runtime.device_of_args(args))
        else:
            place = ("host",)
        return (tuple(keyed), tuple(signature), place), place

    def _key_record(self, tuning_key, device_name):
        keyed, signature, _ = tuning_key
        source, configs = self._source_digests()
        return {"format": RECORD_FORMAT, "kernel": self.fn.fn.__qualname__, "source": source,
                "key": {n: cache.canonical_value(v) for n, v in zip(self.key, keyed)},
                "signature": [list(s) for s in signature], "device": device_name,
                "configs": configs, "tessel": cache.tessel_version()}

    def _source_digests(self):
        """SHA-256 of the kernel's AST (comments and layout left out) and of the configs."""
        if self._digests is None:
            tree = ast.dump(self.fn.source.tree)
            configs = json.dumps([c.record() for c in self.configs], sort_keys=True)
            self._digests = (cache.sha256_text(tree), cache.sha256_text(configs))
        return self._digests

    # --- choosing ------------------------------------------------------------------------------

    def _choose(self, tuning_key, place, grid, args, kwargs, values):
        """(index of the chosen config, whether it was timed)."""
        failures = []               # [(index of a config, why it was skipped)]
        if place[0] != "cuda":
            for i, (config, variant) in enumerate(zip(self.configs, self._variants)):
                try:
                    variant.warmup(*args, **kwargs, **config.kwargs)
                except CompilationError as e:
                    failures.append((i, e))
                    continue
                self._say(tuning_key, f"{config} (the first that compiles; the interpreter "
                                      "times nothing)")
                return i, False
            raise self._none_works(tuning_key, failures)
        device = place[1]
        record = self._key_record(tuning_key, device_name(device))
        path = os.path.join(tuning_directory(), f"{self.fn.__name__}-"
                            f"{cache.sha256_text(json.dumps(record, sort_keys=True))[:32]}.json")
        index = _read_choice(path, record, self.configs)
        if index is not None:
            self._say(tuning_key, f"{self.configs[index]} (chosen before: {path})")
            return index, False
        timings = [None] * len(self.configs)
        calls = {}
        for i, (config, variant) in enumerate(zip(self.configs, self._variants)):
            try:
                variant.warmup(*args, **kwargs, **config.kwargs).gpu_launcher(device)
            except CompilationError as e:
                failures.append((i, e))
                continue

            def call(variant=variant, config=config):
                variant[grid](*args, **kwargs, **config.kwargs)
            calls[i] = call
        # Two rounds, the second in reverse order, each config keeping its better median: the
        # first configs timed run while the GPU's clocks are still rising (on the H200 the
        # first GEMM config of four read 9 % slow and lost to a slower one).
        for order in (list(calls), list(reversed(calls))):
            for i in order:
                if i not in calls:
                    continue
                try:
                    t = cuda_time(calls[i], lambda: self._reset(values), self.warmup_calls,
                                  self.timed_calls, device)
                except _launch_errors() as e:
                    failures.append((i, e))
                    del calls[i]
                    timings[i] = None
                    continue
                timings[i] = t if timings[i] is None else min(timings[i], t)
        timed = [i for i, t in enumerate(timings) if t is not None]
        if not timed:
            raise self._none_works(tuning_key, failures)
        index = min(timed, key=lambda i: timings[i])
        if self._verbose():
            for i, t in enumerate(timings):
                if t is not None:
                    self._say(tuning_key, f"{self.configs[i]}: {t:.4f} ms")
            for i, e in failures:
                self._say(tuning_key, f"{self.configs[i]}: skipped: {_first_line(e)}")
        self._say(tuning_key, f"{self.configs[index]} ({timings[index]:.4f} ms, the fastest of "
                              f"{len(timed)})")
        _write_choice(path, dict(record, chosen=index, config=self.configs[index].record(),
                                 timings_ms=timings, created=int(time.time()),
                                 skipped={str(i): _first_line(e) for i, e in failures}))
        return index, True

    def _reset(self, values):
        for name in self.reset_to_zero:
            _zero(values[name], name)

    def _none_works(self, tuning_key, failures):
        reasons = "; ".join(f"{self.configs[i]}: {_first_line(e)}" for i, e in failures)
        error = CompilationError(f"autotune: no config of {self.__name__} works for "
                                 f"{self._describe(tuning_key)}: {reasons}")
        error.__cause__ = failures[-1][1]
        return error

    def _describe(self, tuning_key):
        keyed, signature, place = tuning_key
        names = ", ".join(f"{n}={v}" for n, v in zip(self.key, keyed))
        dtypes = ",".join(d for _, kind, d in signature if kind == "ptr")
        where = f"cuda:{place[1]}" if place[0] == "cuda" else "interpreter"
        return f"{names} [{dtypes}] on {where}"

    def _verbose(self):
        if self.verbose is not None:
            return self.verbose
        return os.environ.get("TESSEL_AUTOTUNE_VERBOSE", "") not in ("", "0")

    def _say(self, tuning_key, what):
        if self._verbose():
            print(f"tessel autotune: {self.__name__} {self._describe(tuning_key)}: {what}",
                  file=sys.stderr)


def autotune(configs, key, reset_to_zero=None, warmup_calls=10, timed_calls=40, verbose=None):
    """Decorator: tune a ``@tessel.jit`` kernel over launch configurations.

    ``@tessel.autotune(configs=[tessel.Config({...}, num_warps=..., num_stages=...), ...],
    key=["M", "N"])`` above ``@tessel.jit``. The first launch with a new tuning key (the values
    of the ``key`` arguments — an array's shape — the element types of the arguments, and the
    device) picks a config: on CUDA tensors the fastest by CUDA-event timing, remembered in
    memory and on disk (:func:`tessel.autotune.tuning_directory`); on numpy arrays the first
    that compiles. Configs that fail to compile or launch are skipped.
    ``TESSEL_AUTOTUNE_VERBOSE=1`` (or ``verbose=True``) prints each timing and the choice on
    stderr.

    Args:
        configs: a list of :class:`Config`.
        key: names of the arguments whose values select a choice (sizes such as M, N, K).
        reset_to_zero: names of array arguments zeroed before each timed call (outputs that
            the kernel accumulates into), and once more before the launch that follows a
            tuning.
        warmup_calls: untimed calls per config before timing.
        timed_calls: timed calls per config; their median is compared.
        verbose: print the choice (True), stay quiet (False), or read
            ``TESSEL_AUTOTUNE_VERBOSE`` (None).

    Returns:
        A decorator taking the :class:`tessel.JITFunction` and returning an
        :class:`Autotuner`.

    Raises:
        ValueError: no configs, a key or reset_to_zero name the kernel does not have, a config
            setting a parameter that is not a constexpr.
        TypeError: the decorated object is not a ``@tessel.jit`` kernel.
    """
    def decorate(fn):
        return Autotuner(fn, configs, key, reset_to_zero, warmup_calls, timed_calls, verbose)
    return decorate


# --- timing, devices, zeroing ------------------------------------------------------------------

def cuda_time(call, reset, warmup_calls, timed_calls, device):
    """The median time in ms of ``call()`` on CUDA device ``device``, from CUDA events around
    each of ``timed_calls`` calls after ``warmup_calls`` untimed ones; ``reset()`` runs before
    every call, and the L2 cache is flushed before every timed call (as
    ``triton.testing.do_bench`` does), both outside the timed span.

    Raises:
        RuntimeError: torch is not imported (its CUDA events time the calls).
    """
    torch = gpu.torch_module()
    if torch is None:
        raise RuntimeError("autotuning on the GPU times with torch's CUDA events: import torch")
    with torch.cuda.device(device):
        flush = _l2_flush(torch, device)
        for _ in range(warmup_calls):
            reset()
            call()
        spans = []
        for _ in range(timed_calls):
            reset()
            flush()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            call()
            end.record()
            spans.append((start, end))
        torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in spans)


def _l2_flush(torch, device):
    """A callable that evicts the L2 cache of `device` by zeroing twice its size (at least
    32 MiB). Back-to-back calls find their inputs in the L2 where a user's call, after other
    work, does not: on the H200 that ranked a 128x256 GEMM config first that do_bench, which
    flushes, ranks second. No flush when the buffer cannot be allocated (the GPU is full)."""
    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or (128 << 20)
    try:
        buffer = torch.empty(max(2 * l2, 32 << 20), dtype=torch.int8, device=f"cuda:{device}")
    except RuntimeError:
        return lambda: None
    return buffer.zero_


def device_name(device):
    """The name the driver gives CUDA device ``device`` (e.g. "NVIDIA H200")."""
    from . import _tessel
    return _tessel.cuda_device_info(device)[0]


def _zero(value, name):
    """Zeroes a device argument named in reset_to_zero: a torch tensor (anything with
    ``zero_()``); a DevicePointer cannot be."""
    if not hasattr(value, "zero_"):
        raise TypeError(f"reset_to_zero: argument {name!r} ({type(value).__name__}) cannot be "
                        "zeroed: pass a torch tensor")
    value.zero_()


def _launch_errors():
    """What a launch that the driver refuses raises (too much shared memory, too many
    registers): a config to skip, not a failure of the tuning."""
    from . import _tessel
    return (_tessel.CudaError,)


def _first_line(error):
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


# --- the disk ----------------------------------------------------------------------------------

def tuning_directory():
    """Where the choices made on the GPU are kept: the kernel cache's directory
    (``$TESSEL_CACHE_DIR``, else ``$XDG_CACHE_HOME/tessel`` or ``~/.cache/tessel``) with
    ``-autotune`` appended — beside the kernel cache, not in it, since every name in that
    directory is taken for a cache entry."""
    return cache.cache_directory().rstrip(os.sep) + "-autotune"


def _read_choice(path, record, configs):
    """The index of the config a record at ``path`` chose, if the record is for ``record``'s
    key and names one of ``configs``; else None (no file, damaged, another key: tune again)."""
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_RECORD_BYTES + 1)
        if len(data) > _MAX_RECORD_BYTES:
            return None
        stored = json.loads(data)
        if not isinstance(stored, dict) or any(stored.get(k) != v for k, v in record.items()):
            return None
        index = stored.get("chosen")
        if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(configs) \
                and stored.get("config") == configs[index].record():
            return index
    except (OSError, ValueError):
        pass
    return None


_warned_unwritable = set()


def _write_choice(path, data):
    """Writes the record whole (a temporary file renamed into place), or warns once per
    directory that it cannot: the choice then lives in this process only."""
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=directory)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=1, sort_keys=True)
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError as e:
        if directory not in _warned_unwritable:
            _warned_unwritable.add(directory)
            log.warning("tessel: cannot write autotuning choices to %s (%s); they are kept in "
                        "memory for this process", directory, e)


__all__ = ["Config", "Autotuner", "autotune", "tuning_directory"]
