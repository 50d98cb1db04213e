"""`python -m tessel env`: what a bug report needs to say about this installation (as torch's
collect_env) — tessel's version and build, LLVM, ptxas, Python, numpy and torch, the CUDA
devices and the chip tessel compiles for on each, the kernel cache, and the CUDA routes that
wait for their GPU check (module switches off on CUDA). Every probe that fails says why
instead of stopping the report."""
import importlib
import platform
import sys

# The modules whose CUDA switches the report lists (a switch: a module-level bool whose name
# says CUDA or CHECKED; off means the route waits for its GPU check).
_SWITCH_MODULES = ("attention", "backward", "blocksparse", "serving_checks", "varlen_backward",
                   "varlen_cache", "kvcache_append")
# CUDA-only switches whose names do not say so.
_ALSO = (("backward", "AUTO_BLOCK_MASK"),)


def _probe(fn):
    try:
        return fn()
    except Exception as e:                    # noqa: BLE001 (the report says why, not stops)
        return f"unavailable ({type(e).__name__}: {str(e)[:120]})"


def _devices():
    from . import gpu
    count, reason = gpu.device_count()
    if not count:
        return f"none ({reason})"
    from . import _tessel
    out = []
    for d in range(count):
        name, major, minor = _tessel.cuda_device_info(d)
        chip = _probe(lambda: gpu.chip_of(d))
        out.append(f"cuda:{d} {name} (compute capability {major}.{minor}, tessel compiles for "
                   f"{chip})")
    return out


def _cache():
    from . import cache
    directory = cache.cache_directory()
    entries = cache.disk_cache(directory).list()
    size = sum(e["bytes"] for e in entries)
    return f"{directory}: {len(entries)} entries, {size / 2**20:.1f} MiB"


def _torch():
    if "torch" not in sys.modules and importlib.util.find_spec("torch") is None:
        return "not installed"
    import torch
    cuda = torch.version.cuda or "no CUDA"
    return f"{torch.__version__} (CUDA {cuda}, available: {torch.cuda.is_available()})"


def _switches_off():
    off = []
    for name in _SWITCH_MODULES:
        mod = importlib.import_module(f".{name}", __package__)
        off += [f"{name}.{k}" for k, v in sorted(vars(mod).items())
                if k.isupper() and type(v) is bool and not v and ("CUDA" in k or "CHECKED" in k)]
    for name, k in _ALSO:
        if getattr(importlib.import_module(f".{name}", __package__), k) is False:
            off.append(f"{name}.{k}")
    return off or "none"


def report():
    """{field: value (a string or a list of strings)} in the order printed."""
    from . import cache
    import numpy
    return {
        "tessel": _probe(cache.tessel_version),
        "package": __file__.rsplit("/", 1)[0],
        "LLVM": _probe(cache.llvm_version),
        "ptxas": _probe(cache.ptxas_version),
        "Python": f"{platform.python_version()} ({platform.platform()})",
        "numpy": numpy.__version__,
        "torch": _probe(_torch),
        "CUDA devices": _probe(_devices),
        "kernel cache": _probe(_cache),
        "CUDA routes off until their GPU check": _probe(_switches_off),
    }


def print_report(as_json=False):
    r = report()
    if as_json:
        import json
        print(json.dumps(r, indent=2))
        return
    for field, value in r.items():
        if isinstance(value, list):
            print(f"{field}:")
            for v in value:
                print(f"  {v}")
        else:
            print(f"{field}: {value}")
