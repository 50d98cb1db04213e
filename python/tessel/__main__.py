"""The `tessel` command: `python -m tessel cache ...`, `python -m tessel aot ...` and
`python -m tessel env`.

    tessel cache list                  entries: key, kernel, chip, size, age (and bad ones)
    tessel cache verify [--fix]        checks every entry; --fix removes the bad ones
    tessel cache clear                 removes every entry
    tessel cache explain FILE.py SPEC  would this specialisation hit? if not, which ingredient
                                       of the key differs from the nearest entry
    tessel aot FILE.py --spec SPEC ... -o DIR   cubins + PTX + C header/source + manifest
    tessel env [--json]                versions, devices, cache and switches for a bug report

The cache directory is $TESSEL_CACHE_DIR (default ~/.cache/tessel), or --dir. SPEC is
`dtype=f16,head_dim=64,causal=1,mask=none,chip=sm_90a` (docs/aot.md).
"""
import argparse
import json
import sys
import time


def _age(seconds):
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _size(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def cmd_list(cache, args):
    now = time.time()
    entries = cache.list()
    if not entries:
        print(f"{cache.directory}: empty")
        return 0
    print(f"{cache.directory}:")
    print(f"{'key':<14}{'kernel':<24}{'chip':<8}{'size':>10}{'age':>6}  status")
    for e in entries:
        key = e["key"][:12] if not e["temporary"] else e["key"][:24]
        status = "ok" if not e["problem"] else f"BAD: {e['problem']}"
        if e["temporary"] and not e["problem"]:
            status = "being written"
        print(f"{key:<14}{e['kernel'] or '-':<24}{e['chip'] or '-':<8}{_size(e['bytes']):>10}"
              f"{_age(now - e['created']):>6}  {status}")
    return 0


def cmd_verify(cache, args):
    """Exit 1 for bad entries (without --fix) or for anything --fix could not remove. Stale
    temporary directories are reported but are not bad entries: any store removes them after an
    hour, --fix at once."""
    entries = cache.list()
    bad = [e for e in entries if e["problem"] and not e["temporary"]]
    stale = [e for e in entries if e["problem"] and e["temporary"]]
    failed = 0
    for e in bad + stale:
        print(f"{'bad' if not e['temporary'] else 'stale'}: {e['key']}: {e['problem']}")
        if args.fix:
            try:
                cache.remove(e["key"])
                print(f"  removed {e['path']}")
            except RuntimeError as err:
                failed += 1
                print(f"  cannot remove: {err}")
    good = sum(1 for e in entries if not e["problem"] and not e["temporary"])
    summary = f"{good} good, {len(bad)} bad"
    if stale:
        summary += f", {len(stale)} stale temporary"
    if args.fix and (bad or stale):
        removed = len(bad) + len(stale) - failed
        summary += f" ({removed} removed" + (f", {failed} could not be removed)" if failed else ")")
    print(summary)
    if failed:
        return 1
    return 1 if bad and not args.fix else 0


def cmd_clear(cache, args):
    n = cache.clear()
    print(f"removed {n} entries from {cache.directory}")
    return 0


def cmd_explain(cache, args):
    from . import aot
    from . import cache as tcache
    spec = aot.parse_spec(args.spec)
    module = aot.load_dsl(args.file)
    kernel = aot.trace(module, spec, args.kernel)
    ingr = tcache.ingredients(kernel, tcache.GpuOptions(chip=spec.chip,
                                                        num_threads=spec.num_threads))
    print(tcache.explain_miss(cache, ingr))
    if args.verbose:
        print(json.dumps(ingr, indent=2, sort_keys=True))
    return 0


def cmd_aot(args):
    from . import aot
    specs = [aot.parse_spec(s) for s in args.spec]
    def progress(i, n, function, chip):
        print(f"[{i}/{n}] compiling {function} ({chip})", file=sys.stderr, flush=True)
    manifest = aot.compile_specs(args.file, specs, args.output, name=args.name,
                                 kernel_name=args.kernel, progress=progress)
    for k in manifest["kernels"]:
        print(f"{k['function']}: {k['chip']}, block {k['block'][0]}, "
              f"{k['dynamic_shared_bytes']} B dynamic smem, {k['registers']} registers")
    print(f"wrote {args.output}/{args.name}.h, {args.name}.c, {args.name}.json and kernels/")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="tessel", description="tessel's kernel cache and "
                                     "ahead-of-time compiler")
    sub = parser.add_subparsers(dest="command", required=True)

    c = sub.add_parser("cache", help="inspect or clean the kernel cache")
    c.add_argument("--dir", help="cache directory (default: $TESSEL_CACHE_DIR or ~/.cache/tessel)")
    cs = c.add_subparsers(dest="action", required=True)
    cs.add_parser("list", help="list entries")
    v = cs.add_parser("verify", help="check every entry")
    v.add_argument("--fix", action="store_true", help="remove bad entries")
    cs.add_parser("clear", help="remove every entry")
    e = cs.add_parser("explain", help="why a specialisation misses")
    e.add_argument("file", help="the DSL file")
    e.add_argument("spec", help="dtype=f16,head_dim=64,causal=1,mask=none,chip=sm_90a")
    e.add_argument("--kernel", default="attention_kernel")
    e.add_argument("-v", "--verbose", action="store_true", help="print the ingredients")

    a = sub.add_parser("aot", help="compile attention kernels into a C library")
    a.add_argument("file", help="the DSL file holding the attention kernel and mask_mods")
    a.add_argument("--spec", action="append", required=True,
                   help="a specialisation; repeat for more")
    a.add_argument("-o", "--output", required=True, help="output directory")
    a.add_argument("--name", default="tessel_attention",
                   help="file name and prefix of the launch functions")
    a.add_argument("--kernel", default="attention_kernel", help="the @tessel.jit kernel")

    en = sub.add_parser("env", help="versions, devices, cache and switches for a bug report")
    en.add_argument("--json", action="store_true", help="as JSON")

    args = parser.parse_args(argv)
    try:
        if args.command == "env":
            from .env_report import print_report
            print_report(args.json)
            return 0
        if args.command == "aot":
            return cmd_aot(args)
        from . import cache as tcache
        cache = tcache.disk_cache(args.dir)
        return {"list": cmd_list, "verify": cmd_verify, "clear": cmd_clear,
                "explain": cmd_explain}[args.action](cache, args)
    except (ValueError, FileNotFoundError) as err:
        print(f"tessel: error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # CompilationError and friends: a message, not a traceback
        from .errors import CompilationError
        if isinstance(err, CompilationError):
            print(f"tessel: {err}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
