"""The cold compile: its breakdown (TESSEL_TIMING=1) and the work it must not do.

No test here is timed (the project forbids timed unit tests); they check that the breakdown
names every step of a cold compile and of a disk hit, that the compiler's build id comes from the
ELF note the linker wrote (the 110 MB extension is not read), and that the split compile (the
lowering once, then gpu-module-to-binary on the lowered module) makes the same PTX as the named
pipeline tile-to-nvvm. The numbers are in docs/bench/2026-11-29-cold-compile.md.
"""
import hashlib
import os
import pathlib
import re
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from dsl_helpers import BUILD
import tessel
from tessel import cache, timing
from tessel import _tessel

FRONT_END = ["mlir context", "trace", "verify", "print tile ir", "tile pipeline",
             "print tile-opt ir"]
# This d64 64x64 kernel's registers cap it at four CTAs an SM where its shared memory allows
# six: ptxas runs again with .minnctapersm (lib/Target/Occupancy.cpp; the retry spills, so the
# first cubin is kept).
COMPILED = ["compiler version", "ptxas --version", "cache key", "disk lookup", "clone",
            "lowering", "verify lowered", "llvm ir + opt", "nvptx", "ptxas",
            "ptxas again (occupancy)", "cache write"]
DISK = ["compiler version", "ptxas --version", "cache key", "disk lookup", "disk load"]

SCRIPT = textwrap.dedent('''\
    import numpy as np
    import tessel
    from tessel.cache import GpuOptions
    q = np.zeros((1, 1, 64, 64), np.float16)
    k = tessel.compile_attention(q, q, q, causal=True, block_m=64, block_n=64)
    b = k.binary(GpuOptions(chip="sm_90a"))
    print("SOURCE", b.source)
    print("STEPS", "|".join(name for name, _ in b.timings))
    ''')


def elf_build_id(path):
    """The NT_GNU_BUILD_ID note of an ELF64 little-endian file, read from its section headers."""
    data = pathlib.Path(path).read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    for i in range(shnum):
        sh_type, = struct.unpack_from("<I", data, shoff + i * shentsize + 4)
        offset, size = struct.unpack_from("<QQ", data, shoff + i * shentsize + 0x18)
        if sh_type != 7:                      # SHT_NOTE
            continue
        p = offset
        while p + 12 <= offset + size:
            namesz, descsz, ntype = struct.unpack_from("<III", data, p)
            name = data[p + 12:p + 12 + namesz]
            desc_at = p + 12 + (namesz + 3) // 4 * 4
            if ntype == 3 and name == b"GNU\0":
                return data[desc_at:desc_at + descsz].hex()
            p = desc_at + (descsz + 3) // 4 * 4
    return ""


def run(script, cache_dir, **env):
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=str(BUILD / "python"),
                                                TESSEL_CACHE_DIR=str(cache_dir), **env))


def test_build_id_is_the_linkers_note():
    note = elf_build_id(_tessel.__file__)
    assert re.fullmatch(r"[0-9a-f]{40}", note), "the extension is linked with --build-id=sha1"
    assert _tessel.build_id() == note
    assert cache.build_id() == f"elf:{note}"


def test_build_id_does_not_read_the_extension(tmp_path):
    # An audit hook sees every open() of the process: the build id opens nothing.
    script = textwrap.dedent('''\
        import sys
        import tessel
        from tessel import cache, _tessel
        opened = []
        sys.addaudithook(lambda event, args: opened.append(str(args[0]))
                         if event == "open" else None)
        bid = cache.build_id()
        print("OPENED", [p for p in opened if "_tessel" in p])
        print("ID", bid)
        ''')
    r = run(script, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "OPENED []" in r.stdout
    assert f"ID elf:{elf_build_id(_tessel.__file__)}" in r.stdout


def test_build_id_without_a_note_hashes_the_file(monkeypatch):
    monkeypatch.setattr(_tessel, "build_id", lambda: "")
    monkeypatch.setattr(cache, "_build_id", None)
    h = hashlib.sha256(pathlib.Path(_tessel.__file__).read_bytes()).hexdigest()[:16]
    assert cache.build_id() == h
    monkeypatch.setattr(cache, "_build_id", None)   # the next caller sees the note again


def test_timing_breakdown_names_every_step(tmp_path):
    r = run(SCRIPT, tmp_path, TESSEL_TIMING="1")
    assert r.returncode == 0, r.stderr
    assert "SOURCE compiled" in r.stdout
    steps = r.stdout.split("STEPS ")[1].splitlines()[0].split("|")
    assert steps == FRONT_END + COMPILED
    err = r.stderr
    assert "tessel timing: attention_kernel for sm_90a: compiled" in err
    assert re.search(r"import tessel +[0-9.]+ ms +\(once per process", err)
    lines = [l.split()[:-2] for l in err.splitlines() if l.startswith("  ") and l.endswith(" ms")]
    assert [" ".join(l) for l in lines] == FRONT_END + COMPILED + ["total"]
    # MLIR's pass timing: the lowering, then tessel-module-to-binary, in one report.
    assert "Execution time report" in err
    for name in ("ConvertTileToMMA", "ConvertTileToGPU", "Canonicalizer", "ConvertGpuOpsToNVVMOps",
                 "ModuleToBinary"):
        assert name in err, name

    # A fresh process on the filled cache: a disk hit, no compile, no pass report.
    r = run(SCRIPT, tmp_path, TESSEL_TIMING="1")
    assert r.returncode == 0, r.stderr
    assert "SOURCE disk" in r.stdout
    assert r.stdout.split("STEPS ")[1].splitlines()[0].split("|") == FRONT_END + DISK
    assert "Execution time report" not in r.stderr

    # Without TESSEL_TIMING the steps are kept but nothing is printed.
    r = run(SCRIPT, tmp_path / "quiet")
    assert r.returncode == 0 and "tessel timing" not in r.stderr and "SOURCE compiled" in r.stdout


def test_memory_hits_carry_no_timings(tmp_path):
    q = np.zeros((1, 1, 32, 32), np.float16)
    k = tessel.compile_attention(q, q, q, block_m=32, block_n=32)
    gpu = cache.GpuOptions(chip="sm_80", codegen="reference")
    first = cache.get_binary(k, gpu, directory=str(tmp_path))
    assert first.source == "compiled" and [n for n, _ in first.timings][-1] == "cache write"
    again = cache.get_binary(k, gpu, directory=str(tmp_path))
    assert again.source == "memory" and again.timings == []


def decode_mlir_string(text):
    out, i = bytearray(), 0
    while i < len(text):
        if text[i] == "\\":
            if text[i + 1] in '\\"':
                out += text[i + 1].encode()
                i += 2
            else:
                out.append(int(text[i + 1:i + 3], 16))
                i += 3
        else:
            out += text[i].encode()
            i += 1
    return out.decode()


def test_split_compile_makes_the_ptx_of_the_named_pipeline(tmp_path):
    # compileModule lowers once and runs gpu-module-to-binary on the lowered module; the named
    # pipeline tile-to-nvvm runs both parts in one pass manager (with verification after every
    # pass). The PTX must be the same, byte for byte.
    q = np.zeros((1, 1, 64, 64), np.float16)
    k = tessel.compile_attention(q, q, q, causal=True, block_m=64, block_n=64)
    r = k._builder.compile_gpu(chip="sm_90a", codegen="auto")
    assert r["ok"], r["diagnostics"]
    src = tmp_path / "k.mlir"
    src.write_text(k.asm["tile-opt"])
    out = subprocess.run([str(BUILD / "bin" / "tessel-opt"), str(src), "--pass-pipeline="
                          "builtin.module(tile-to-nvvm{chip=sm_90a codegen=auto format=isa})"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    m = re.search(r'assembly = "((?:[^"\\]|\\.)*)"', out.stdout)
    assert m and decode_mlir_string(m.group(1)) == r["ptx"]


def test_format_report():
    text = timing.format_report("k", [("a", 0.001), ("bb", 0.002)], "PASSES")
    assert "  a " in text and "  bb " in text and "total" in text and text.endswith("PASSES\n")
