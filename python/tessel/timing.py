"""Where a cold compile spends its time: ``TESSEL_TIMING=1``.

Every compile records the wall time of its steps (a clock read per step, always on):

- the front end (tessel/jit.py): ``trace`` (the DSL function run into tile IR), ``verify``,
  ``print tile ir`` (the text the cache key hashes), ``tile pipeline`` (``tile-optimize``),
  ``print tile-opt ir``; kept as ``CompiledKernel.timings``;
- the cache (tessel/cache.py): ``compiler version`` (the build id of the extension),
  ``ptxas --version`` (once per ptxas and process), ``cache key``, ``disk lookup``, then either
  ``disk load`` or the compile and ``cache write``;
- the compile (C++, lib/Target/Compile.cpp): ``clone``, ``lowering`` (tile → GPU → NVVM/LLVM
  dialect), ``verify lowered``, ``llvm ir + opt`` (translation to LLVM IR and LLVM's O3 pipeline),
  ``nvptx`` (LLVM IR → PTX), ``ptxas``;

kept as ``GpuBinary.timings``. With ``TESSEL_TIMING=1`` (any value but empty or 0) each
``CompiledKernel.binary()`` that is not a memory hit prints the breakdown on stderr, preceded
once per process by the time ``import tessel`` took, and followed by MLIR's pass timing report
of the lowering and gpu-module-to-binary (``PassManager::enableTiming``; only then on, as it
costs a little).
"""
import os
import sys
import time

ENV = "TESSEL_TIMING"

#: Seconds `import tessel` took (set by tessel/__init__.py).
import_seconds = None
_import_reported = False


def enabled():
    return os.environ.get(ENV, "") not in ("", "0")


class Steps:
    """Wall time of consecutive steps: ``lap(name)`` closes the step that began at the last lap."""

    __slots__ = ("steps", "_last")

    def __init__(self):
        self.steps = []
        self._last = time.perf_counter()

    def lap(self, name):
        now = time.perf_counter()
        self.steps.append((name, now - self._last))
        self._last = now

    def add(self, steps, prefix=""):
        """Appends steps measured elsewhere (the C++ compile) and restarts the clock."""
        self.steps.extend((prefix + name, float(s)) for name, s in steps)
        self._last = time.perf_counter()


def format_report(title, steps, pass_timing=""):
    """The breakdown as text: one line per step, the total, then MLIR's pass report if any."""
    width = max([len(n) for n, _ in steps] + [len("total")]) + 2
    lines = [f"tessel timing: {title}"]
    global _import_reported
    if import_seconds is not None and not _import_reported:
        lines.append(f"  {'import tessel':<{width}} {import_seconds * 1000:8.1f} ms"
                     "   (once per process, not in the total)")
        _import_reported = True
    for name, s in steps:
        lines.append(f"  {name:<{width}} {s * 1000:8.1f} ms")
    lines.append(f"  {'total':<{width}} {sum(s for _, s in steps) * 1000:8.1f} ms")
    text = "\n".join(lines) + "\n"
    if pass_timing:
        text += pass_timing if pass_timing.endswith("\n") else pass_timing + "\n"
    return text


def report(title, steps, pass_timing=""):
    """Prints the breakdown on stderr when TESSEL_TIMING is set."""
    if enabled():
        sys.stderr.write(format_report(title, steps, pass_timing))
        sys.stderr.flush()
