"""The kernel cache: a key correct by construction, and a disk cache that survives faults.

The key: changing any ingredient changes it; comments, blank lines, line numbers, file paths and
the toolkit's path do not. The disk cache: concurrent writers, a writer killed between its
temporary write and the rename, corrupted entries, a read-only or full directory. Faults are made
with the test hook TESSEL_CACHE_FAULT (lib/Runtime/KernelCache.cpp); the tests run as root, where
chmod does not stop writes, so a read-only directory is simulated with the hook, a real
unwritable one is /sys (EPERM even for root), and the chmod case runs only as non-root.
"""
import dataclasses
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from dsl_helpers import BUILD, needs_ptxas
import tessel
from tessel import cache
from tessel import _tessel

HERE = pathlib.Path(__file__).resolve().parent
WORKER = HERE / "cache_worker.py"

KERNEL = '''\
import tessel
from tessel import language as tl


@tessel.jit
def scale(x, y, n, alpha, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    xd = tl.make_desc(x, shape=(n,), strides=(1,))
    yd = tl.make_desc(y, shape=(n,), strides=(1,))
    t = tl.load(xd, (pid * BLOCK,), shape=(BLOCK,))
    tl.store(yd, (pid * BLOCK,), t * alpha)
'''

# The same kernel with other comments, blank lines, spacing and so other line numbers.
KERNEL_RESTYLED = '''\
"""A docstring that moves every line down."""
import tessel
from tessel import language as tl

# a comment


@tessel.jit
def scale(x, y, n, alpha,
          BLOCK: tl.constexpr):   # the block
    pid = tl.program_id(0)        # which block

    xd = tl.make_desc(x, shape=(n,), strides=(1,))
    yd = tl.make_desc(y, shape=(n, ), strides=(1, ))
    t = tl.load(xd, (pid*BLOCK,), shape=(BLOCK,))
    # scale it
    tl.store(yd, (pid*BLOCK,), t*alpha)
'''

X = np.zeros(1, np.float32)


def load(tmp_path, source, name="kernels.py"):
    import importlib.util
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"m_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path


@pytest.fixture
def kern(tmp_path):
    module, _ = load(tmp_path, KERNEL)
    return module.scale.warmup(X, X, 1, 1.0, BLOCK=32)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("TESSEL_CACHE_DIR", str(d))
    monkeypatch.delenv("TESSEL_CACHE_FAULT", raising=False)
    cache.forget_memory()
    yield d
    cache.forget_memory()


def worker(path, cache_dir, chip="sm_80", block=32, count=1, fault=None, timeout=120):
    env = dict(os.environ, TESSEL_CACHE_DIR=str(cache_dir), TESSEL_BUILD_DIR=str(BUILD.resolve()))
    env.pop("TESSEL_CACHE_FAULT", None)
    if fault:
        env["TESSEL_CACHE_FAULT"] = fault
    return subprocess.Popen([sys.executable, str(WORKER), str(path), chip, str(block), str(count)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=str(HERE))


def finish(proc, timeout=120):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def entries(d):
    return sorted(p.name for p in pathlib.Path(d).iterdir()) if pathlib.Path(d).exists() else []


def tessel_cli(*args, cache_dir=None, timeout=120):
    env = dict(os.environ, PYTHONPATH=str(BUILD.resolve() / "python"))
    if cache_dir:
        env["TESSEL_CACHE_DIR"] = str(cache_dir)
    return subprocess.run([sys.executable, "-m", "tessel", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


# --- the key ---------------------------------------------------------------------------------

def test_every_ingredient_changes_the_key(kern):
    base = kern.key_ingredients(cache.GpuOptions(chip="sm_80"))
    key = cache.key_of(base)
    assert set(base) == {"kernel", "tile_ir", "specialization", "chip", "options", "tessel", "llvm",
                         "ptxas"}
    seen = {key}
    for name, value in base.items():
        if isinstance(value, dict):
            for opt in value:
                changed = json.loads(json.dumps(base))
                changed[name][opt] = "something else"
                seen.add(cache.key_of(changed))
        else:
            changed = dict(base, **{name: value + ["x"] if isinstance(value, list) else value + "x"})
            seen.add(cache.key_of(changed))
    assert len(seen) == 1 + len(base) - 1 + len(base["options"])


def test_real_changes_change_the_key(tmp_path, kern):
    gpu = cache.GpuOptions(chip="sm_80")
    keys = {
        "base": kern.key(gpu),
        "chip": kern.key(cache.GpuOptions(chip="sm_90a")),
        "threads": kern.key(cache.GpuOptions(chip="sm_80", num_threads=64)),
        "features": kern.key(cache.GpuOptions(chip="sm_80", features="+ptx81")),
        "overlap": kern.key(cache.GpuOptions(chip="sm_80", wgmma_overlap=True)),
        "stages": kern.key(cache.GpuOptions(chip="sm_80", num_stages=3)),
        "async dots": kern.key(cache.GpuOptions(chip="sm_80", wgmma_async_dots=True)),
        "no hints": kern.key(cache.GpuOptions(chip="sm_80", occupancy_hints=False)),
    }
    module, _ = load(tmp_path, KERNEL, "other.py")
    keys["constexpr"] = module.scale.warmup(X, X, 1, 1.0, BLOCK=64).key(gpu)
    keys["dtype"] = module.scale.warmup(X.astype(np.float16), X, 1, 1.0, BLOCK=32).key(gpu)
    keys["pipeline"] = tessel.jit(module.scale.fn, options=tessel.CompileOptions(
        pipeline="canonicalize")).warmup(X, X, 1, 1.0, BLOCK=32).key(gpu)
    edited, _ = load(tmp_path, KERNEL.replace("t * alpha", "t * alpha + 1.0"), "edited.py")
    keys["code"] = edited.scale.warmup(X, X, 1, 1.0, BLOCK=32).key(gpu)
    assert len(set(keys.values())) == len(keys), keys
    # The C++ target options string and the versions are in.
    ingr = kern.key_ingredients(gpu)
    assert ingr["options"]["target"] == "chip=sm_80;features=+ptx80;num-threads=128;codegen=auto"
    assert ingr["llvm"].startswith("22.") and "release" in ingr["ptxas"]
    # The version and the linker's build id of the extension (SHA-1: 40 hex digits).
    assert ingr["tessel"].startswith("0.1.0+elf:") and len(ingr["tessel"]) == len("0.1.0+elf:") + 40


def test_versions_change_the_key(kern, monkeypatch):
    gpu = cache.GpuOptions(chip="sm_80")
    base = kern.key(gpu)
    monkeypatch.setattr(cache, "ptxas_version", lambda toolkit="": "release 99.9")
    assert kern.key(gpu) != base
    monkeypatch.undo()
    monkeypatch.setattr(cache, "llvm_version", lambda: "23.0.0")
    assert kern.key(gpu) != base
    monkeypatch.undo()
    monkeypatch.setattr(cache, "tessel_version", lambda: "0.1.0+other")
    assert kern.key(gpu) != base


def test_comments_whitespace_locations_and_paths_do_not_change_the_key(tmp_path):
    a, _ = load(tmp_path / "one", KERNEL)
    b, _ = load(tmp_path / "two" / "deeper", KERNEL_RESTYLED, "renamed.py")
    ka = a.scale.warmup(X, X, 1, 1.0, BLOCK=32)
    kb = b.scale.warmup(X, X, 1, 1.0, BLOCK=32)
    assert ka.asm["tile"] == kb.asm["tile"]
    gpu = cache.GpuOptions(chip="sm_90a")
    assert ka.key(gpu) == kb.key(gpu)
    # The toolkit is a path: the same ptxas found another way gives the same key; so does the
    # backend a kernel runs on (not code).
    assert ka.key(gpu) == ka.key(dataclasses.replace(gpu, toolkit="/usr/local/cuda"))
    other = tessel.jit(a.scale.fn, options=tessel.CompileOptions(backend="gpu"))
    assert other.warmup(X, X, 1, 1.0, BLOCK=32).key(gpu) == ka.key(gpu)


def test_mask_mod_constexpr_is_named_without_address_or_module(tmp_path):
    from tessel.attention import attention_kernel
    srcs = {}
    for name in ("a", "b"):
        module, _ = load(tmp_path / name, "import tessel\n\n@tessel.jit\ndef window(b, h, q, k):\n"
                         "    return q - k < 8\n", f"masks_{name}.py")
        q = np.zeros(0, np.float16)
        k = attention_kernel.warmup(q, q, q, q, np.zeros(0, np.float32), 1, 1, 1, 1, 1.0, D=16,
                                    BLOCK_M=16, BLOCK_N=16, CAUSAL=False, SCORE_MOD=None,
                                    MASK_MOD=module.window)
        srcs[name] = k.key_ingredients(cache.GpuOptions())
        assert ["MASK_MOD", "constexpr", "JITFunction", "jit:window"] in srcs[name]["specialization"]
    assert cache.key_of(srcs["a"]) == cache.key_of(srcs["b"])


def test_every_option_field_says_whether_it_changes_code():
    for record in (tessel.CompileOptions(), cache.GpuOptions()):
        for f in dataclasses.fields(record):
            assert "code" in f.metadata, f"{type(record).__name__}.{f.name}"

    @dataclasses.dataclass(frozen=True)
    class Unclassified:
        fast_math: bool = False
    with pytest.raises(TypeError, match="does not say whether it changes code"):
        cache.code_fields(Unclassified())
    with pytest.raises(ValueError, match="unknown chip"):
        cache.GpuOptions(chip="sm_70")
    with pytest.raises(ValueError, match="unknown codegen"):
        cache.GpuOptions(codegen="wgmma-someday")


# --- the disk cache --------------------------------------------------------------------------

def test_memory_disk_and_compile(kern, cache_dir):
    gpu = cache.GpuOptions(chip="sm_80")
    first = kern.binary(gpu)
    assert first.source == "compiled" and first.cubin[:4] == b"\x7fELF"
    assert ".entry scale(" in first.ptx and first.block == (128, 1, 1)
    assert kern.binary(gpu).source == "memory"
    cache.forget_memory()
    again = kern.binary(gpu)
    assert again.source == "disk" and again.cubin == first.cubin and again.ptx == first.ptx
    assert entries(cache_dir) == [first.key]
    m = json.loads((cache_dir / first.key / "manifest.json").read_text())
    assert m["kernel"] == "scale" and m["entry"] == "scale" and m["chip"] == "sm_80"
    assert m["signature"] == [["x", "ptr", "f32"], ["y", "ptr", "f32"], ["n", "scalar", "i32"],
                              ["alpha", "scalar", "f32"]]
    assert m["block"] == [128, 1, 1] and m["dynamic_shared_bytes"] == 0
    assert m["ingredients"] == kern.key_ingredients(gpu) and m["key"] == first.key
    assert m["payload"]["kernel.cubin"]["size"] == len(first.cubin)


def test_concurrent_writers_end_with_one_good_entry(tmp_path):
    _, path = load(tmp_path, KERNEL)
    d = tmp_path / "cache"
    # Each writer holds its finished temporary entry for 300 ms before the rename, so the eight
    # overlap; the first rename wins and the others discard theirs.
    procs = [worker(path, d, fault="delay-before-rename=300") for _ in range(8)]
    results = [finish(p) for p in procs]
    assert len({r["sha"][0] for r in results}) == 1
    assert len({r["keys"][0] for r in results}) == 1
    assert entries(d) == [results[0]["keys"][0]]          # no temporaries left behind
    assert all(r["warnings"] == [] for r in results)
    r = tessel_cli("cache", "verify", cache_dir=d)
    assert r.returncode == 0 and "1 good, 0 bad" in r.stdout
    # A ninth process reads the entry instead of compiling.
    assert finish(worker(path, d))["source"] == ["disk"]


def test_killed_between_write_and_rename_leaves_no_entry(tmp_path):
    _, path = load(tmp_path, KERNEL)
    d = tmp_path / "cache"
    p = worker(path, d, fault="kill-before-rename")
    p.communicate(timeout=120)
    assert p.returncode == -9
    names = entries(d)
    assert len(names) == 1 and names[0].startswith(".tmp-")     # only the dead writer's temp
    listed = tessel_cli("cache", "list", cache_dir=d)
    assert "stale temporary directory" in listed.stdout
    r = finish(worker(path, d))
    assert r["source"] == ["compiled"]
    assert r["keys"][0] in entries(d)
    fix = tessel_cli("cache", "verify", "--fix", cache_dir=d)
    assert fix.returncode == 0 and "removed" in fix.stdout
    assert entries(d) == [r["keys"][0]]
    assert finish(worker(path, d))["source"] == ["disk"]


def corrupt_flip(entry):
    cubin = entry / "kernel.cubin"
    data = bytearray(cubin.read_bytes())
    data[len(data) // 2] ^= 0xFF
    cubin.write_bytes(bytes(data))


def corrupt_truncate(entry):
    cubin = entry / "kernel.cubin"
    cubin.write_bytes(cubin.read_bytes()[:100])


def corrupt_manifest(entry):
    (entry / "manifest.json").write_text("{ this is not json")


def corrupt_ptx_missing(entry):
    (entry / "kernel.ptx").unlink()


def corrupt_other_key(entry):
    m = json.loads((entry / "manifest.json").read_text())
    m["key"] = "0" * 64
    (entry / "manifest.json").write_text(json.dumps(m))


@pytest.mark.parametrize("corrupt", [corrupt_flip, corrupt_truncate, corrupt_manifest,
                                     corrupt_ptx_missing, corrupt_other_key])
def test_corrupted_entries_are_detected_and_rebuilt(kern, cache_dir, corrupt):
    gpu = cache.GpuOptions(chip="sm_80")
    good = kern.binary(gpu)
    corrupt(cache_dir / good.key)
    r = tessel_cli("cache", "verify", cache_dir=cache_dir)
    assert r.returncode == 1 and f"bad: {good.key}" in r.stdout
    # Never returned: the C++ lookup discards it and says why.
    entry, problem = cache.disk_cache().lookup(good.key)
    assert entry is None and problem
    assert entries(cache_dir) == []
    cache.forget_memory()
    rebuilt = kern.binary(gpu)
    assert rebuilt.source == "compiled" and rebuilt.cubin == good.cubin
    cache.forget_memory()
    assert kern.binary(gpu).source == "disk"


def test_corrupted_entry_found_by_a_lookup_is_rebuilt(kern, cache_dir):
    gpu = cache.GpuOptions(chip="sm_80")
    good = kern.binary(gpu)
    corrupt_flip(cache_dir / good.key)
    cache.forget_memory()
    rebuilt = kern.binary(gpu)
    assert rebuilt.source == "compiled" and rebuilt.cubin == good.cubin
    assert entries(cache_dir) == [good.key]


# --- a shared or hostile cache directory (issue 15) -----------------------------------------

def test_symlinked_entry_is_never_followed(kern, cache_dir, tmp_path):
    # A link named like the key, to someone else's directory: an ordinary compile used to delete
    # every file in it (discarding the "bad entry" followed the link). Now the link alone is moved
    # aside and removed, and the kernel is compiled and cached.
    gpu = cache.GpuOptions(chip="sm_80")
    key = kern.key(gpu)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious").write_text("keep me")
    cache_dir.mkdir()
    (cache_dir / key).symlink_to(victim)
    b = kern.binary(gpu)
    assert b.source == "compiled"
    assert (victim / "precious").read_text() == "keep me"
    assert entries(cache_dir) == [key] and (cache_dir / key).is_dir()
    assert not (cache_dir / key).is_symlink()
    # Links inside an entry are not followed either, by a lookup, `verify --fix` or `clear`.
    cubin = cache_dir / key / "kernel.cubin"
    cubin.unlink()
    cubin.symlink_to(victim / "precious")
    r = tessel_cli("cache", "verify", "--fix", cache_dir=cache_dir)
    assert f"bad: {key}" in r.stdout
    assert entries(cache_dir) == [] and (victim / "precious").read_text() == "keep me"
    (cache_dir / key).symlink_to(victim)
    assert "removed 1 entries" in tessel_cli("cache", "clear", cache_dir=cache_dir).stdout
    assert (victim / "precious").read_text() == "keep me"


def test_edited_launch_fields_are_a_bad_entry(kern, cache_dir):
    # The whole manifest is under its digest: edited launch needs are not a hit, and `verify`
    # does not call them good.
    gpu = cache.GpuOptions(chip="sm_80")
    good = kern.binary(gpu)
    path = cache_dir / good.key / "manifest.json"
    m = json.loads(path.read_text())
    m["dynamic_shared_bytes"] = 200000
    path.write_text(json.dumps(m, indent=2))
    r = tessel_cli("cache", "verify", cache_dir=cache_dir)
    assert r.returncode == 1 and "manifest.json checksum mismatch" in r.stdout
    cache.forget_memory()
    again = kern.binary(gpu)
    assert again.source == "compiled" and again.dynamic_shared_bytes == 0


def test_another_kernels_cubin_is_refused(tmp_path, kern, cache_dir):
    # An entry consistent in every checksum but holding another kernel's cubin: the cubin does
    # not define the entry point the manifest names.
    gpu = cache.GpuOptions(chip="sm_80")
    good = kern.binary(gpu)
    other, _ = load(tmp_path, KERNEL.replace("def scale(", "def other("), "other.py")
    theirs = other.other.warmup(X, X, 1, 1.0, BLOCK=32).binary(gpu)
    m = json.loads((cache_dir / good.key / "manifest.json").read_text())
    for k in ("format", "key", "created", "payload", "manifest_sha256"):
        m.pop(k, None)
    disk = cache.disk_cache()
    disk.remove(good.key)
    assert disk.store(good.key, theirs.cubin, theirs.ptx, json.dumps(m))[0] == "written"
    cache.forget_memory()
    entry, problem = cache.disk_cache().lookup(good.key)
    assert entry is None
    assert problem == "the cubin does not define the entry point 'scale' the manifest names"


def test_deeply_nested_manifest_does_not_crash(kern, cache_dir):
    # `[` x 50,000 segfaulted every later load, list, verify and clear (a recursive JSON parse).
    gpu = cache.GpuOptions(chip="sm_80")
    good = kern.binary(gpu)
    (cache_dir / good.key / "manifest.json").write_text("[" * 50000)
    listed = tessel_cli("cache", "list", cache_dir=cache_dir)
    assert listed.returncode == 0 and "nested deeper than 64 levels" in listed.stdout
    r = tessel_cli("cache", "verify", cache_dir=cache_dir)
    assert r.returncode == 1 and "nested deeper than 64 levels" in r.stdout
    cleared = tessel_cli("cache", "clear", cache_dir=cache_dir)
    assert cleared.returncode == 0 and entries(cache_dir) == []
    cache.forget_memory()
    kern.binary(gpu)
    (cache_dir / good.key / "manifest.json").write_text("[" * 50000)
    cache.forget_memory()
    assert kern.binary(gpu).source == "compiled"


@pytest.mark.parametrize("file", ["kernel.cubin", "manifest.json"])
def test_fifo_in_an_entry_does_not_hang(kern, cache_dir, file):
    # A FIFO in place of a file blocked load, list and verify forever (the open waits for a
    # writer); now it is a bad entry, found without opening it.
    gpu = cache.GpuOptions(chip="sm_80")
    good = kern.binary(gpu)
    path = cache_dir / good.key / file
    path.unlink()
    os.mkfifo(path)
    for action in ("list", "verify"):
        r = tessel_cli("cache", action, cache_dir=cache_dir, timeout=30)   # a hang fails
        assert f"{file} is a FIFO, not a file" in r.stdout
    cache.forget_memory()
    assert kern.binary(gpu).source == "compiled"


def test_dangling_symlink_key_does_not_block_caching(kern, cache_dir):
    # A dangling link named like the key used to keep the kernel out of the disk cache for good.
    gpu = cache.GpuOptions(chip="sm_80")
    key = kern.key(gpu)
    cache_dir.mkdir()
    (cache_dir / key).symlink_to("/nonexistent/tessel-cache-entry")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", cache.CacheWarning)
        assert kern.binary(gpu).source == "compiled"
    assert (cache_dir / key).is_dir() and not (cache_dir / key).is_symlink()
    cache.forget_memory()
    assert kern.binary(gpu).source == "disk"


def test_verify_fix_reports_what_it_cannot_remove(kern, cache_dir, monkeypatch):
    # On a read-only directory `verify --fix` printed "(removed)" and exited 0; the hook makes
    # removals fail as a read-only file system would (the tests run as root).
    good = kern.binary(cache.GpuOptions(chip="sm_80"))
    corrupt_flip(cache_dir / good.key)
    monkeypatch.setenv("TESSEL_CACHE_FAULT", "erofs")
    r = tessel_cli("cache", "verify", "--fix", cache_dir=cache_dir)
    assert r.returncode == 1, r.stdout
    assert "Read-only file system" in r.stdout and "1 could not be removed" in r.stdout
    assert entries(cache_dir) == [good.key]


def test_stale_temporaries_are_swept_by_age(tmp_path):
    # Writers killed with kill -9 leave .tmp- directories; a store removes those over an hour old,
    # and `verify` reports them without failing.
    _, path = load(tmp_path, KERNEL)
    d = tmp_path / "cache"
    p = worker(path, d, fault="kill-before-rename")
    p.communicate(timeout=120)
    [temp] = entries(d)
    r = tessel_cli("cache", "verify", cache_dir=d)
    assert r.returncode == 0 and "stale: .tmp-" in r.stdout and "1 stale temporary" in r.stdout
    old = os.stat(d / temp).st_mtime - 7200
    os.utime(d / temp, (old, old))
    out = finish(worker(path, d, block=64))
    assert entries(d) == [out["keys"][0]]


@pytest.mark.parametrize("fault", ["erofs", "eacces", "enospc", "enospc-write"])
def test_unwritable_directory_falls_back_to_memory_with_one_warning(tmp_path, fault):
    _, path = load(tmp_path, KERNEL)
    d = tmp_path / "cache"
    r = finish(worker(path, d, count=3, fault=fault))
    assert r["source"] == ["compiled"] * 3
    assert len(r["warnings"]) == 1, r["warnings"]
    reason = {"erofs": "Read-only file system", "eacces": "Permission denied",
              "enospc": "No space left on device", "enospc-write": "No space left on device"}
    assert reason[fault] in r["warnings"][0] and "kept in memory" in r["warnings"][0]
    assert [n for n in entries(d) if not n.startswith(".trash")] == []   # no partial entry


def test_really_unwritable_directory_falls_back(tmp_path):
    # /sys refuses mkdir even for root (EPERM): a real unwritable cache directory.
    _, path = load(tmp_path, KERNEL)
    if os.access("/sys", os.W_OK) and os.path.isdir("/sys/class") is False:
        pytest.skip("/sys is not sysfs here")
    r = finish(worker(path, "/sys/tessel-cache", count=2))
    assert r["source"] == ["compiled", "compiled"] and len(r["warnings"]) == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores chmod: covered by the fault hook "
                    "and /sys")
def test_read_only_directory_by_chmod(tmp_path):
    _, path = load(tmp_path, KERNEL)
    d = tmp_path / "cache"
    d.mkdir()
    d.chmod(0o555)
    try:
        r = finish(worker(path, d, count=2))
    finally:
        d.chmod(0o755)
    assert len(r["warnings"]) == 1 and "Permission denied" in r["warnings"][0]


# --- the command ------------------------------------------------------------------------------

def test_cache_command(kern, cache_dir, tmp_path):
    good = kern.binary(cache.GpuOptions(chip="sm_80"))
    listed = tessel_cli("cache", "list", cache_dir=cache_dir)
    assert listed.returncode == 0
    line = next(l for l in listed.stdout.splitlines() if l.startswith(good.key[:12]))
    assert "scale" in line and "sm_80" in line and "KiB" in line and line.endswith("ok")
    ok = tessel_cli("cache", "verify", cache_dir=cache_dir)
    assert ok.returncode == 0 and "1 good, 0 bad" in ok.stdout
    corrupt_truncate(cache_dir / good.key)
    bad = tessel_cli("cache", "verify", cache_dir=cache_dir)
    assert bad.returncode == 1 and "kernel.cubin has 100 bytes" in bad.stdout
    fixed = tessel_cli("cache", "verify", "--fix", cache_dir=cache_dir)
    assert fixed.returncode == 0 and entries(cache_dir) == []
    cache.forget_memory()
    kern.binary(cache.GpuOptions(chip="sm_80"))
    cleared = tessel_cli("cache", "clear", cache_dir=cache_dir)
    assert "removed 1 entries" in cleared.stdout and entries(cache_dir) == []
    assert "empty" in tessel_cli("cache", "list", cache_dir=cache_dir).stdout


def test_explain_names_the_differing_ingredient(kern, cache_dir, capfd, monkeypatch):
    kern.binary(cache.GpuOptions(chip="sm_90a"))
    disk = cache.disk_cache()
    ingr = kern.key_ingredients(cache.GpuOptions(chip="sm_80"))
    assert cache.explain_miss(disk, ingr).startswith("miss: chip differs (sm_80 vs sm_90a)")
    ingr = kern.key_ingredients(cache.GpuOptions(chip="sm_90a", num_threads=64))
    assert "option gpu.num_threads differs (64 vs 128)" in cache.explain_miss(disk, ingr)
    assert cache.explain_miss(disk, kern.key_ingredients(cache.GpuOptions())).startswith("hit")
    # On a miss with TESSEL_CACHE_EXPLAIN=1 the reason goes to stderr.
    monkeypatch.setenv("TESSEL_CACHE_EXPLAIN", "1")
    kern.binary(cache.GpuOptions(chip="sm_80"))
    assert "tessel cache: scale: miss: chip differs (sm_80 vs sm_90a)" in capfd.readouterr().err


def test_explain_command(cache_dir):
    dsl = pathlib.Path(__file__).resolve().parents[2] / "examples" / "aot" / "attention_dsl.py"
    r = tessel_cli("cache", "explain", str(dsl), "head_dim=16,chip=sm_80", cache_dir=cache_dir)
    assert r.returncode == 0 and "miss: no entry for kernel 'attention_kernel'" in r.stdout
    bad = tessel_cli("cache", "explain", str(dsl), "head_dim=16,chip=sm_70", cache_dir=cache_dir)
    assert bad.returncode == 2 and "chip must be one of" in bad.stderr


def test_wgmma_codegen_compiles_for_sm90a_and_is_refused_for_sm80(cache_dir):
    # GpuOptions(codegen="wgmma"): the sm_90a wgmma path (docs/dev/codegen-wgmma.md), its own
    # cache entry, a located compilation error for sm_80.
    q = np.zeros((1, 1, 64, 64), np.float16)
    k = tessel.compile_attention(q, q, q, causal=True, block_m=64, block_n=64)
    wgmma = k.binary(cache.GpuOptions(chip="sm_90a", codegen="wgmma"))
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16" in wgmma.ptx
    assert "mma.sync" not in wgmma.ptx
    assert wgmma.block == (128, 1, 1) and wgmma.dynamic_shared_bytes == 32768
    mma = k.binary(cache.GpuOptions(chip="sm_90a", codegen="mma"))
    assert "wgmma" not in mma.ptx and mma.key != wgmma.key
    with pytest.raises(tessel.CompilationError, match="cannot use codegen=wgmma on sm_80"):
        k.binary(cache.GpuOptions(chip="sm_80", codegen="wgmma"))


def test_wgmma_overlap_option_reaches_the_lowering(cache_dir):
    # GpuOptions(wgmma_overlap=True): FA3's schedule on the sm_90a wgmma path (off by default):
    # S_j and the previous P·V in flight together, the softmax under wait_group 1.
    q = np.zeros((1, 1, 64, 64), np.float16)
    k = tessel.compile_attention(q, q, q, causal=True, block_m=64, block_n=64)
    plain = k.binary(cache.GpuOptions(chip="sm_90a"))
    overlap = k.binary(cache.GpuOptions(chip="sm_90a", wgmma_overlap=True))
    assert "wgmma.wait_group.sync.aligned 1;" in overlap.ptx
    assert "wgmma.wait_group.sync.aligned 1;" not in plain.ptx
    assert overlap.key != plain.key
    assert k.key_ingredients(cache.GpuOptions(chip="sm_90a", wgmma_overlap=True))["options"][
        "target"].endswith(";wgmma-overlap")
    with pytest.raises(TypeError, match="wgmma_overlap must be a bool"):
        cache.GpuOptions(wgmma_overlap="yes")


def test_wgmma_async_dots_option_reaches_the_lowering(cache_dir):
    # GpuOptions(wgmma_async_dots=True): each wgmma waited for just before its first use. In the
    # d128 key-rows dK/dV program Sᵀ and dPᵀ are adjacent, so the first wait leaves dPᵀ in
    # flight (pending 1); without the option every wgmma is waited for at once.
    from tessel.backward import FAST_BACKWARD_BLOCKS, _config, attention_bwd_dkdv_keyrows
    q = np.zeros((1, 2, 100, 128), np.float16)
    row = np.zeros((1, 2, 100), np.float32)
    _, scale, cx = _config(q, q, q, True, None, None, None, False, *FAST_BACKWARD_BLOCKS[128])
    k = attention_bwd_dkdv_keyrows.warmup(q, q, q, q, row, row, q, q, q, 100, 100, 2, 2, 2,
                                          scale, **cx)
    plain = k.binary(cache.GpuOptions(chip="sm_90a"))
    eager = k.binary(cache.GpuOptions(chip="sm_90a", wgmma_async_dots=True))
    assert "wgmma.wait_group.sync.aligned 1;" in eager.ptx
    assert "wgmma.wait_group.sync.aligned 1;" not in plain.ptx
    assert eager.key != plain.key
    assert k.key_ingredients(cache.GpuOptions(chip="sm_90a", wgmma_async_dots=True))["options"][
        "target"].endswith(";wgmma-async-dots")
    with pytest.raises(TypeError, match="wgmma_async_dots must be a bool"):
        cache.GpuOptions(wgmma_async_dots=1)


@pytest.mark.parametrize("chip", ["sm_90a", "sm_80"])
def test_sink_waits_option_reaches_the_lowering(cache_dir, chip):
    # GpuOptions(sink_waits), on by default: the wait for Q goes below the key loop's first
    # copies and leaves their group in flight (cp.async.wait_group 1 at two stages); off, Q is
    # waited for alone first. Same shared memory (on wgmma Q moves to the ring's last stage);
    # its own key.
    q = np.zeros((1, 1, 64, 128), np.float16)
    k = tessel.compile_attention(q, q, q, block_m=64, block_n=64)
    on = k.binary(cache.GpuOptions(chip=chip))
    off = k.binary(cache.GpuOptions(chip=chip, sink_waits=False))
    assert "cp.async.wait_group 1;" in " ".join(on.ptx.split())
    assert "cp.async.wait_group 1;" not in " ".join(off.ptx.split())
    assert on.dynamic_shared_bytes == off.dynamic_shared_bytes
    assert on.key != off.key
    assert k.key_ingredients(cache.GpuOptions(chip=chip, sink_waits=False))["options"][
        "target"].endswith(";no-sink-waits")
    with pytest.raises(TypeError, match="sink_waits must be a bool"):
        cache.GpuOptions(sink_waits=1)


def test_warp_specialize_option_reaches_the_lowering(cache_dir):
    # GpuOptions(warp_specialize), on by default: a 128-row wgmma block (two consumer
    # warpgroups) gets a producer warpgroup — 384 threads, setmaxnreg, mbarriers, Q beside the
    # ring; off, 256 threads copy K/V themselves. A 64-row block (one warpgroup) and sm_80 are
    # the same either way. Its own key.
    q = np.zeros((1, 1, 128, 128), np.float16)
    k = tessel.compile_attention(q, q, q, block_m=128, block_n=128)
    on = k.binary(cache.GpuOptions(chip="sm_90a"))
    off = k.binary(cache.GpuOptions(chip="sm_90a", warp_specialize=False))
    assert on.block == (384, 1, 1) and off.block == (256, 1, 1)
    assert "setmaxnreg.inc.sync.aligned.u32" in on.ptx and "mbarrier.try_wait" in on.ptx
    assert "setmaxnreg" not in off.ptx and "mbarrier" not in off.ptx
    assert on.dynamic_shared_bytes > off.dynamic_shared_bytes
    assert on.key != off.key
    assert k.key_ingredients(cache.GpuOptions(chip="sm_90a", warp_specialize=False))[
        "options"]["target"].endswith(";no-warp-specialize")
    small = tessel.compile_attention(q, q, q, block_m=64, block_n=64)
    for chip, kernel in (("sm_90a", small), ("sm_80", k)):
        a = kernel.binary(cache.GpuOptions(chip=chip)).ptx
        assert a == kernel.binary(cache.GpuOptions(chip=chip, warp_specialize=False)).ptx
    with pytest.raises(TypeError, match="warp_specialize must be a bool"):
        cache.GpuOptions(warp_specialize=1)


def test_overlap_consumers_option_reaches_the_lowering(cache_dir):
    # GpuOptions(overlap_consumers), on by default: the consumers of a warp-specialized d128
    # block issue S_j and the previous block's P·V together and wait for S_j with one group in
    # flight (wait_group 1), Q read by descriptor; off, every wgmma is waited for at once. d256
    # at 128x64 is overlapped too since its drain issues no P·V for an empty loop (before, the
    # overlapped kernel spilled and the module fell back to the plain schedule without turns),
    # with 0 bytes of spill. Its own key.
    q = np.zeros((1, 1, 128, 128), np.float16)
    k = tessel.compile_attention(q, q, q, block_m=128, block_n=128)
    on = k.binary(cache.GpuOptions(chip="sm_90a")).ptx
    off = k.binary(cache.GpuOptions(chip="sm_90a", overlap_consumers=False)).ptx
    assert "wgmma.wait_group.sync.aligned 1;" in on
    assert "wgmma.wait_group.sync.aligned 1;" not in off and "setmaxnreg" in off
    assert k.key_ingredients(cache.GpuOptions(chip="sm_90a", overlap_consumers=False))[
        "options"]["target"].endswith(";no-overlap-consumers")
    wide = np.zeros((1, 1, 128, 256), np.float16)
    d256 = tessel.compile_attention(wide, wide, wide, block_m=128, block_n=64)
    default = d256.binary(cache.GpuOptions(chip="sm_90a"))
    assert "wgmma.wait_group.sync.aligned 1;" in default.ptx and "bar.arrive 2" in default.ptx
    assert default.manifest["spill_bytes"] == 0
    plain = d256.binary(cache.GpuOptions(chip="sm_90a", overlap_consumers=False,
                                         pingpong=False)).ptx
    assert "wgmma.wait_group.sync.aligned 1;" not in plain and "bar.arrive 2" not in plain
    with pytest.raises(TypeError, match="overlap_consumers must be a bool"):
        cache.GpuOptions(overlap_consumers=1)


def test_vector_stores_option_reaches_the_lowering(cache_dir):
    # GpuOptions(vector_stores), on by default: the 16-bit output tile stored 16 bytes a thread
    # after a quad transpose (8 st.global.v4 a thread at 128x128 d128, the pairs kept for a
    # block not aligned to 16 bytes), on the wgmma and the mma.sync paths. Off: 4-byte pairs
    # only, a key of its own.
    q = np.zeros((1, 1, 128, 128), np.float16)
    k = tessel.compile_attention(q, q, q, block_m=128, block_n=128)
    on = k.binary(cache.GpuOptions(chip="sm_90a"))
    off = k.binary(cache.GpuOptions(chip="sm_90a", vector_stores=False)).ptx
    assert "st.global.v4.b32" not in off
    assert on.ptx.count("st.global.v4.b32") == 8 and "st.global.b32" in on.ptx
    assert on.manifest["spill_bytes"] == 0 and on.manifest["given_up"] == []
    assert k.key_ingredients(cache.GpuOptions(chip="sm_90a", vector_stores=False))[
        "options"]["target"].endswith(";no-vector-stores")
    assert "vector-stores" not in k.key_ingredients(cache.GpuOptions(chip="sm_90a"))[
        "options"]["target"]
    mma = tessel.compile_attention(q, q, q, block_m=64, block_n=64)
    assert "st.global.v4.b32" in mma.binary(cache.GpuOptions(chip="sm_80")).ptx
    with pytest.raises(TypeError, match="vector_stores must be a bool"):
        cache.GpuOptions(vector_stores=1)


@pytest.mark.parametrize("causal", [False, True])
def test_tma_left_out_where_the_overlap_needs_its_registers(cache_dir, causal):
    # The d256 128x64 kernel spilled overlapped with TMA (its per-tile record) and not without,
    # so compileModule's spill fallback gave TMA up after a whole compile (1.4 s of the first
    # call). convert-tile-to-mma now leaves TMA out where the overlap would leave the consumers
    # fewer than 32 registers (d256 128x64: 24): one compile, the kernel the fallback made —
    # overlap and vector stores kept, cp.async copies, no spill, nothing given up. d128
    # 128x128 (40 to spare) keeps TMA.
    q = np.zeros((1, 1, 128, 256), np.float16)
    b = tessel.compile_attention(q, q, q, causal=causal, block_m=128, block_n=64).binary(
        cache.GpuOptions(chip="sm_90a"))
    assert "cp.async.bulk.tensor" not in b.ptx
    assert "wgmma.wait_group.sync.aligned 1" in b.ptx and "st.global.v4.b32" in b.ptx
    assert b.manifest["spill_bytes"] == 0 and b.manifest["given_up"] == []
    assert not [n for n, _ in b.timings if "again" in n and "occupancy" not in n]
    q = np.zeros((1, 1, 128, 128), np.float16)
    d128 = tessel.compile_attention(q, q, q, causal=causal, block_m=128, block_n=128).binary(
        cache.GpuOptions(chip="sm_90a"))
    assert "cp.async.bulk.tensor" in d128.ptx and d128.manifest["given_up"] == []


def test_pingpong_option_reaches_the_lowering(cache_dir):
    # GpuOptions(pingpong), on by default: the two overlapped consumer warpgroups of a d128
    # 128x128 block take turns issuing their dots — named barriers 2 and 3 (bar.sync before the
    # pair, bar.arrive after it, the second warpgroup's first arrival). Off: no turns. Without
    # the overlap the synchronous consumers take their turns around the softmax instead (after
    # S, before P·V: cuDNN's schedule), and none with pingpong off. Its own key.
    q = np.zeros((1, 1, 128, 128), np.float16)
    k = tessel.compile_attention(q, q, q, block_m=128, block_n=128)
    on = k.binary(cache.GpuOptions(chip="sm_90a")).ptx
    off = k.binary(cache.GpuOptions(chip="sm_90a", pingpong=False)).ptx
    assert "bar.arrive 2, 256;" in on and "bar.arrive" not in off
    assert "wgmma.wait_group.sync.aligned 1;" in off
    turns = k.binary(cache.GpuOptions(chip="sm_90a", overlap_consumers=False)).ptx
    plain = k.binary(cache.GpuOptions(chip="sm_90a", overlap_consumers=False,
                                      pingpong=False)).ptx
    assert "bar.arrive 2, 256;" in turns and "wgmma.wait_group.sync.aligned 1;" not in turns
    assert "bar.arrive" not in plain and "wgmma.wait_group.sync.aligned 1;" not in plain
    assert k.key_ingredients(cache.GpuOptions(chip="sm_90a", pingpong=False))[
        "options"]["target"].endswith(";no-pingpong")


def test_num_stages_option_reaches_the_lowering(cache_dir):
    # GpuOptions(num_stages=3): a ring of three K/V stages (two blocks in flight ahead of the
    # one in use): more shared memory, cp.async waits that leave one group pending, its own key.
    # (Without sink_waits, whose wait for Q leaves the prologue's group pending at two stages.)
    q = np.zeros((1, 1, 64, 128), np.float16)
    k = tessel.compile_attention(q, q, q, causal=True, block_m=64, block_n=64)
    two = k.binary(cache.GpuOptions(chip="sm_90a", sink_waits=False))
    three = k.binary(cache.GpuOptions(chip="sm_90a", num_stages=3, sink_waits=False))
    assert three.dynamic_shared_bytes == two.dynamic_shared_bytes + 64 * 128 * 2 * 2
    assert "cp.async.wait_group 1;" in " ".join(three.ptx.split())
    assert "cp.async.wait_group 1;" not in " ".join(two.ptx.split())
    assert three.key != two.key
    assert k.key_ingredients(cache.GpuOptions(chip="sm_90a", num_stages=3))["options"][
        "target"].endswith(";num-stages=3")
    for bad in (1, 5, True, "3"):
        with pytest.raises(ValueError, match="num_stages must be 2, 3 or 4"):
            cache.GpuOptions(num_stages=bad)


def test_num_warps_of_a_kernel_sets_the_reference_lowerings_threads(tmp_path, cache_dir):
    # @tessel.jit(num_warps=...) and kernel.with_options(...): Triton's launch options, on the
    # JITFunction (the C dispatcher binds calls against the kernel's own parameters).
    module, _ = load(tmp_path, KERNEL)
    plain = module.scale.warmup(X, X, 1, 1.0, BLOCK=32)
    two = module.scale.with_options(num_warps=2).warmup(X, X, 1, 1.0, BLOCK=32)
    eight = tessel.jit(module.scale.fn, num_warps=8).warmup(X, X, 1, 1.0, BLOCK=32)
    blocks = {}
    for name, k in (("plain", plain), ("two", two), ("eight", eight)):
        b = k.binary(k.options.gpu_options("sm_80"))
        assert b.block == k.binary().block               # the default chip alike
        blocks[name] = (b.block, b.key, " ".join(b.ptx.split()))
    assert blocks["plain"][0] == (128, 1, 1) and ".maxntid 128, 1, 1" in blocks["plain"][2]
    assert blocks["two"][0] == (64, 1, 1) and ".maxntid 64, 1, 1" in blocks["two"][2]
    assert blocks["eight"][0] == (256, 1, 1) and ".maxntid 256, 1, 1" in blocks["eight"][2]
    assert len({key for _, key, _ in blocks.values()}) == 3
    assert two.key() != plain.key() and two.cache_key == two.key()
    # A GpuOptions given explicitly is taken as it is.
    assert two.binary(cache.GpuOptions(chip="sm_80")).block == (128, 1, 1)


def test_with_options_shares_the_source_and_keeps_one_variant_per_options(tmp_path):
    module, _ = load(tmp_path, KERNEL)
    kern = module.scale
    variant = kern.with_options(num_warps=4, num_stages=3)
    assert variant.options == tessel.CompileOptions(num_warps=4, num_stages=3)
    assert kern.with_options(num_stages=3, num_warps=4) is variant
    assert variant.with_options(num_warps=None, num_stages=None) is kern
    assert kern.with_options() is kern
    assert variant.source is kern.source
    # Its own specialisations: the interpreter runs it like the kernel it came from.
    x = np.arange(40, dtype=np.float32)
    y = np.zeros_like(x)
    variant[(2,)](x, y, 40, 2.0, BLOCK=32)
    np.testing.assert_array_equal(y, 2 * x)
    assert variant.cache and not kern.cache


def test_bad_num_warps_and_num_stages_are_refused(tmp_path):
    module, _ = load(tmp_path, KERNEL)
    for bad in (0, 3, 64, True, "4"):
        with pytest.raises(ValueError, match="num_warps must be 1, 2, 4, 8, 16 or 32"):
            tessel.CompileOptions(num_warps=bad)
    with pytest.raises(ValueError, match="num_warps must be"):
        tessel.jit(num_warps=5)
    for bad in (1, 5, False):
        with pytest.raises(ValueError, match="num_stages must be 2, 3 or 4"):
            module.scale.with_options(num_stages=bad)
    with pytest.raises(TypeError, match="unknown option 'warps'"):
        module.scale.with_options(warps=4)


def test_do_not_specialize_keys_a_float_by_its_type(tmp_path):
    # Triton's option: `alpha` keys by its type alone, one generic kernel (no tile.moderate)
    # for every value, and the interpreter runs it with each value.
    module, _ = load(tmp_path, KERNEL)
    generic = module.scale.with_options(do_not_specialize=["alpha"])
    assert generic.options.do_not_specialize == ("alpha",)
    assert generic is module.scale.with_options(do_not_specialize=("alpha",))
    x = np.arange(40, dtype=np.float32)
    y = np.zeros_like(x)
    for alpha in (2.0, -3.0, 0.0):
        generic[(2,)](x, y, 40, alpha, BLOCK=32)
        np.testing.assert_array_equal(y, alpha * x)
    (key,), (kernel,) = list(generic.cache), list(generic.cache.values())[0]
    assert key[3] == ("alpha", "scalar", "f32", "any") and len(generic.cache[key]) == 1
    assert "tile.moderate" not in kernel.asm["tile"]
    specialised = module.scale.warmup(x, y, 40, 2.0, BLOCK=32)
    assert "tile.moderate" in specialised.asm["tile"]
    assert generic.options.digest() != module.scale.options.digest()
    with pytest.raises(ValueError, match="do_not_specialize names no parameter 'beta'"):
        module.scale.with_options(do_not_specialize=("beta",))
    with pytest.raises(ValueError, match="do_not_specialize names a constexpr 'BLOCK'"):
        tessel.jit(module.scale.fn, do_not_specialize=("BLOCK",))
    with pytest.raises(TypeError, match="do_not_specialize must be parameter names"):
        tessel.CompileOptions(do_not_specialize=(3,))


def test_every_gpu_option_reaches_the_compile_by_name():
    # GpuOptions' fields are the C++ compile's keyword arguments (cache.target_fields): a field
    # the binding does not know is a TypeError, not a switch silently left at its default.
    from tessel import _tessel
    fields = cache.target_fields(cache.GpuOptions(chip="sm_80", spill_fallbacks=False))
    assert _tessel.target_options_key(**fields).startswith("chip=sm_80;")
    with pytest.raises(TypeError, match="unknown GPU compile option 'bogus'"):
        _tessel.target_options_key(**fields, bogus=True)


@needs_ptxas()
def test_spill_fallbacks_switch_keeps_the_first_compile(cache_dir):
    # The d128 64x64 backward key-rows program spills with the scale fold; the search compiles
    # it again generic. With spill_fallbacks off, the first compile (the fold, its spill) is
    # the result: nothing given up, no second compile, a key of its own.
    from tessel.backward import attention_bwd_dkdv_keyrows
    x = np.zeros((1, 2, 256, 128), np.float16)
    row = np.zeros((1, 2, 256), np.float32)
    cx = dict(D=128, BLOCK_M=64, BLOCK_N=64, CAUSAL=True, SCORE_MOD=None, MASK_MOD=None)
    once = attention_bwd_dkdv_keyrows.with_options(spill_fallbacks=False)
    assert once.options.gpu_options("sm_90a").spill_fallbacks is False
    k = once.warmup(x, x, x, x, row, row, x, x, x, 256, 256, 2, 2, 2, 0.088, **cx)
    b = k.binary(once.options.gpu_options("sm_90a"))
    assert b.manifest["spill_bytes"] > 0 and b.manifest["given_up"] == []
    assert not [n for n, _ in b.timings if n.startswith("compile again")]
    assert k.key_ingredients(once.options.gpu_options("sm_90a"))["options"]["target"].endswith(
        ";no-spill-fallbacks")
    searched = k.binary(cache.GpuOptions(chip="sm_90a"))
    assert searched.manifest["given_up"] == ["scale fold"] and searched.ptx != b.ptx
    with pytest.raises(TypeError, match="spill_fallbacks must be a bool"):
        cache.GpuOptions(spill_fallbacks=0)


def test_num_stages_of_a_kernel_reaches_the_fast_paths(cache_dir):
    from tessel.attention import _prepare, attention_kernel
    q = np.zeros((1, 1, 64, 128), np.float16)
    args, constexprs, _, _, _ = _prepare(q, q, q, True, None, None, None, False, 64, 64)
    two = attention_kernel.warmup(*args, **constexprs).binary()
    three = attention_kernel.with_options(num_stages=3).warmup(*args, **constexprs).binary()
    # Q's wait leaves the prologue's groups in flight: one at two stages, two at three.
    assert "cp.async.wait_group 2;" in " ".join(three.ptx.split())
    assert "cp.async.wait_group 2;" not in " ".join(two.ptx.split())
    assert three.dynamic_shared_bytes > two.dynamic_shared_bytes
    assert three.manifest["ingredients"]["options"]["gpu.num_stages"] == 3


class FakeLauncher:
    """Stands for a tessel._tessel.Launcher: remembers the binary, launches nothing."""

    def __init__(self, binary):
        self.binary = binary
        self.launches = 0

    def launch(self, grid, stream, *args):
        self.launches += 1

    def __call__(self, grid, stream, *args):       # how the C dispatcher calls a Python entry
        self.launch(grid, stream, *args)


def test_a_gpu_launch_compiles_with_the_kernels_options(tmp_path, cache_dir, monkeypatch):
    # kernel[grid](device pointers) on a machine without a GPU: the chip and the launcher are
    # stand-ins; the compile behind them is real.
    module, _ = load(tmp_path, KERNEL)
    made = []
    monkeypatch.setattr(tessel.gpu, "chip_of", lambda device: "sm_80")
    monkeypatch.setattr(tessel.gpu, "launcher",
                        lambda binary, params: made.append(FakeLauncher(binary)) or made[-1])
    x = tessel.DevicePointer(1 << 20, "f32")
    module.scale.with_options(num_warps=2, num_stages=3)[(1,)](x, x, 1, 1.0, BLOCK=32)
    module.scale[(1,)](x, x, 1, 1.0, BLOCK=32)
    tuned, plain = (m.binary for m in made)
    assert tuned.chip == "sm_80" and tuned.block == (64, 1, 1) and plain.block == (128, 1, 1)
    assert tuned.manifest["ingredients"]["options"]["gpu.num_stages"] == 3
    assert plain.manifest["ingredients"]["options"]["gpu.num_stages"] == 2
    assert made[0].launches == 1 and made[1].launches == 1


def test_the_compile_notice_says_what_spilling_cost():
    # A first call that ptxas made compile again (the spill fallback) says how many compiles
    # ran and what was given up, so that a slow first call is explained.
    from types import SimpleNamespace
    binary = SimpleNamespace(manifest={"given_up": ["tma-producer", "overlap-consumers"],
                                       "spill_bytes": 0})
    steps = [("lowering", 0.1), ("compile again (spills: no tma-producer)", 1.0),
             ("compile again (spills: no overlap-consumers)", 1.0),
             ("compile again (no spill: tma-producer back)", 1.0)]
    assert cache._spill_story({"binary": binary, "steps": steps}) == \
        " (4 compiles: ptxas spilled; gave up tma-producer, overlap-consumers)"
    binary.manifest.update(given_up=[], spill_bytes=48)
    assert cache._spill_story({"binary": binary, "steps": steps[:2]}) == \
        " (2 compiles: ptxas spilled; nothing given up in the end; still 48 bytes of spill)"
    assert cache._spill_story({"binary": binary, "steps": steps[:1]}) == ""
    assert cache._spill_story({}) == ""


def test_a_slow_compile_says_so_once_and_a_hit_says_nothing(kern, cache_dir, monkeypatch, capfd):
    # Past SLOW_COMPILE_S a compile says on stderr which kernel compiles, then how long it took;
    # memory and disk hits say nothing, and TESSEL_QUIET=1 silences the compile's lines.
    monkeypatch.setattr(cache, "SLOW_COMPILE_S", 0.0)
    monkeypatch.delenv("TESSEL_QUIET", raising=False)
    gpu = cache.GpuOptions(chip="sm_80")
    assert kern.binary(gpu).source == "compiled"
    said = [line for line in capfd.readouterr().err.splitlines() if line.startswith("tessel: ")]
    assert len(said) == 2, said
    assert said[0].startswith("tessel: compiling scale for sm_80 (the first call"), said
    assert said[1].startswith("tessel: compiled scale for sm_80 in "), said
    assert kern.binary(gpu).source == "memory"
    cache.forget_memory()
    assert kern.binary(gpu).source == "disk"
    assert "tessel: compil" not in capfd.readouterr().err
    monkeypatch.setenv("TESSEL_QUIET", "1")
    assert kern.binary(cache.GpuOptions(chip="sm_90a")).source == "compiled"
    assert "tessel: compil" not in capfd.readouterr().err


def test_trim_options_key_the_cache():
    # trim_zero_columns and trim_output_columns (on by default) name themselves in the target
    # key only when off; both are bools.
    q = np.zeros((1, 1, 128, 64), np.float16)
    k = tessel.compile_attention(q, q, q, block_m=64, block_n=64)

    def target(**options):
        return k.key_ingredients(cache.GpuOptions(chip="sm_90a", **options))["options"]["target"]
    assert "trim" not in target()
    assert target(trim_zero_columns=False).endswith(";no-trim-zero-columns")
    assert target(trim_output_columns=False).endswith(";no-trim-output-columns")
    for name in ("trim_zero_columns", "trim_output_columns"):
        with pytest.raises(TypeError, match=f"{name} must be a bool"):
            cache.GpuOptions(**{name: 1})
