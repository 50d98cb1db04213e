#!/usr/bin/env python3
"""PTX corpus: compiles a fixed matrix of tile programs to PTX, one file per case, so that two
builds can be compared with `diff -r` (is a refactor a pure move?).

    python3 scripts/ptx_corpus.py OUT [--build DIR] [--jobs N] [--only REGEX] [--list]

The programs: the naive attention kernels of test/python/attention_kernels.py (f16/bf16, every
mask, 64/128 query rows, 64/128 keys, head dim 64/128), the DSL's tessel.attention with the
score_mod/mask_mod of examples/python (ALiBi, soft-capping, sliding window, document mask,
prefix-LM), and examples/*.mlir. The options: --codegen reference/mma/wgmma/auto, --chip
sm_80/sm_90a, --wgmma-overlap, and (through tessel-opt, which tesselc does not expose)
convert-tile-to-mma's warp-rows 16/32. Every case writes OUT/<case>.ptx when it compiles and
OUT/<case>.refused (exit status and error text) when it does not; diagnostics of a case that
compiles (the `auto` fallback remarks) go to OUT/<case>.log. Nothing in OUT depends on where OUT
or the build is: commands run in OUT on inputs/… with relative names. OUT/MANIFEST lists each
case's command. The inputs are regenerated from the checkout and the build's Python package
each time (the DSL's tile IR is part of what is compared).

docs/dev/codegen.md, "Checking that a refactor is a pure move", shows the workflow.
"""
import argparse
import concurrent.futures
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]

DTYPES = ("f16", "bf16")
BLOCKS = ((64, 64), (64, 128), (128, 64), (128, 128))
HEAD_DIMS = (64, 128)
# Shared-memory limit the pipeline gives convert-tile-to-mma per chip (tessel::maxSharedBytesPerBlock).
SHARED_LIMIT = {"sm_80": 163 * 1024, "sm_90a": 227 * 1024}

# The DSL's score_mod / mask_mod variants (examples/python), traced with numpy inputs.
DSL_MODS = ("plain", "causal", "alibi", "softcap", "sliding_window", "document_mask",
            "prefix_lm")
# (dtype, query rows, keys, head dim) of each DSL variant: the blocks tessel.attention picks
# (sm_80: 128x64; sm_90a: 64x64 at d128, 64x128 at d64) and the smallest.
DSL_SHAPES = (("f16", 64, 64, 64), ("f16", 128, 64, 128), ("bf16", 64, 64, 128),
              ("f16", 64, 128, 64))


def write_inputs(inputs, build):
    """The tile programs, as inputs/<name>.mlir; returns {name: kind}."""
    inputs.mkdir(parents=True)
    programs = {}
    sys.path.insert(0, str(ROOT / "test" / "python"))
    from attention_kernels import MASKS, naive_attention_kernel
    for dt in DTYPES:
        for mask in MASKS:
            for bm, bn in BLOCKS:
                for d in HEAD_DIMS:
                    name = f"attn-{dt}-{mask}-m{bm}-n{bn}-d{d}"
                    (inputs / f"{name}.mlir").write_text(naive_attention_kernel(dt, mask, bm, bn, d))
                    programs[name] = "attention"
    # f32 attention: outside the fast paths' class (auto falls back to the reference lowering).
    for mask in ("none", "causal"):
        name = f"attn-f32-{mask}-m64-n64-d64"
        (inputs / f"{name}.mlir").write_text(naive_attention_kernel("f32", mask, 64, 64, 64))
        programs[name] = "f32"
    for mod in DSL_MODS:
        for dt, bm, bn, d in DSL_SHAPES:
            name = f"dsl-{mod}-{dt}-m{bm}-n{bn}-d{d}"
            (inputs / f"{name}.mlir").write_text(dsl_attention(build, mod, dt, bm, bn, d))
            programs[name] = "dsl"
    for example in sorted((ROOT / "examples").glob("*.mlir")):
        name = "example-" + example.stem
        shutil.copy(example, inputs / f"{name}.mlir")
        programs[name] = "example"
    return programs


_dsl = None


def dsl_attention(build, mod, dtype, bm, bn, d):
    """The tile IR tessel.attention traces for a score_mod/mask_mod variant (before tile-optimize)."""
    global _dsl
    if _dsl is None:
        sys.path.insert(0, str(build / "python"))
        import numpy as np
        import tessel
        from tessel import language as tl

        @tessel.jit
        def alibi(score, b, h, q_idx, kv_idx):
            slope = tl.exp2(-8.0 * (h + 1).to(tl.float32) / 4)
            return score + slope * (kv_idx - q_idx).to(tl.float32)

        @tessel.jit
        def softcap(score, b, h, q_idx, kv_idx):
            return 2.0 * tl.tanh(score / 2.0)

        @tessel.jit
        def sliding_window(b, h, q_idx, kv_idx):
            return (q_idx >= kv_idx) & (q_idx - kv_idx < 24)

        @tessel.jit
        def document_id(idx):
            doc = idx * 0
            for start in (37, 60):
                doc = doc + (idx >= start).to(tl.int32)
            return doc

        @tessel.jit
        def document_mask(b, h, q_idx, kv_idx):
            return (document_id(q_idx) == document_id(kv_idx)) & (q_idx >= kv_idx)

        @tessel.jit
        def prefix_lm(b, h, q_idx, kv_idx):
            return (kv_idx < 20) | (q_idx >= kv_idx)

        _dsl = (np, tessel, {
            "plain": {}, "causal": {"causal": True},
            "alibi": {"causal": True, "score_mod": alibi},
            "softcap": {"score_mod": softcap},
            "sliding_window": {"mask_mod": sliding_window},
            "document_mask": {"mask_mod": document_mask},
            "prefix_lm": {"mask_mod": prefix_lm}})
    np, tessel, mods = _dsl
    x = np.zeros((1, 4, 256, d), dtype=np.float16 if dtype == "f16" else np.uint16)
    kernel = tessel.compile_attention(x, x, x, block_m=bm, block_n=bn, **mods[mod])
    return kernel.asm["tile"]


def tesselc(chip, codegen, overlap=False, extra=()):
    cmd = ["tesselc", f"--chip={chip}", f"--codegen={codegen}", "--emit=ptx"]
    if overlap:
        cmd.append("--wgmma-overlap")
    return cmd + list(extra)


def tessel_opt_warp_rows(chip, warp_rows, wgmma=False, overlap=False):
    """convert-tile-to-mma with warp-rows (not a tesselc option), then the rest of tile-to-nvvm
    (its convert-tile-to-gpu finds no program left): the PTX inside the gpu.binary."""
    mma = f"chip={chip} shared-limit={SHARED_LIMIT[chip]} warp-rows={warp_rows}"
    if wgmma:
        mma += " wgmma=true"
    if overlap:
        mma += " wgmma-overlap=true"
    return ["tessel-opt", "--tile-optimize", f"--convert-tile-to-mma={mma}",
            f"--tile-to-nvvm=chip={chip} codegen=reference format=isa"]


def cases(programs):
    """[(case name, input name, command)]: the fixed matrix."""
    out = []

    def add(prog, tag, cmd):
        out.append((f"{prog}.{tag}", prog, cmd))

    for prog, kind in programs.items():
        if kind == "attention":
            _, dt, mask, m, n, d = prog.split("-")
            f16, d64 = dt == "f16", d == "d64"
            # Every program: mma.sync on sm_80, wgmma plain and overlapped on sm_90a.
            add(prog, "sm_80.mma", tesselc("sm_80", "mma"))
            add(prog, "sm_90a.wgmma", tesselc("sm_90a", "wgmma"))
            add(prog, "sm_90a.wgmma.overlap", tesselc("sm_90a", "wgmma", overlap=True))
            if f16:
                # The other warp rows (tessel-opt: not a tesselc option), mma.sync on sm_90a.
                other_rows = 16 if m == "m128" else 32
                add(prog, f"sm_80.mma.warp-rows-{other_rows}",
                    tessel_opt_warp_rows("sm_80", other_rows))
                add(prog, "sm_90a.mma", tesselc("sm_90a", "mma"))
            if f16 and d64:
                add(prog, "sm_80.auto", tesselc("sm_80", "auto"))
                add(prog, "sm_90a.auto", tesselc("sm_90a", "auto"))
            if f16 and m == "m64" and n == "n64" and d64:
                # Refusals (wgmma on sm_80, wgmma with 32 rows per warp), the other
                # combinations of auto and overlap, and the reference path.
                add(prog, "sm_80.wgmma", tesselc("sm_80", "wgmma"))
                add(prog, "sm_90a.wgmma.warp-rows-32",
                    tessel_opt_warp_rows("sm_90a", 32, wgmma=True))
                add(prog, "sm_90a.mma.warp-rows-32", tessel_opt_warp_rows("sm_90a", 32))
                add(prog, "sm_80.auto.overlap", tesselc("sm_80", "auto", overlap=True))
                add(prog, "sm_90a.auto.overlap", tesselc("sm_90a", "auto", overlap=True))
                for chip in ("sm_80", "sm_90a"):
                    add(prog, f"{chip}.reference", tesselc(chip, "reference"))
        elif kind == "f32":
            for chip in ("sm_80", "sm_90a"):
                add(prog, f"{chip}.auto", tesselc(chip, "auto"))
                add(prog, f"{chip}.mma", tesselc(chip, "mma"))
        elif kind == "dsl":
            add(prog, "sm_80.mma", tesselc("sm_80", "mma"))
            add(prog, "sm_90a.wgmma", tesselc("sm_90a", "wgmma"))
            if "-f16-m64-n64-" in prog:
                add(prog, "sm_90a.wgmma.overlap", tesselc("sm_90a", "wgmma", overlap=True))
        elif kind == "example":
            for chip in ("sm_80", "sm_90a"):
                for codegen in ("reference", "mma", "auto") + (("wgmma",) if chip == "sm_90a" else ()):
                    add(prog, f"{chip}.{codegen}", tesselc(chip, codegen))
                add(prog, f"{chip}.reference.no-tile-optimize",
                    tesselc(chip, "reference", extra=["--tile-optimize=false"]))
                add(prog, f"{chip}.reference.threads-256",
                    tesselc(chip, "reference", extra=["--num-threads=256"]))
            add(prog, "sm_90a.wgmma.overlap", tesselc("sm_90a", "wgmma", overlap=True))
    return out


_GPU_OBJECT = re.compile(r'assembly = "((?:[^"\\]|\\.)*)"')


def unescape_mlir(s):
    """An MLIR string attribute's text: \\XX hex bytes, \\\\, \\", \\n, \\t."""
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\":
            out += c.encode()
            i += 1
            continue
        nxt = s[i + 1]
        if nxt in "\\\"":
            out += nxt.encode()
            i += 2
        elif nxt == "n":
            out += b"\n"
            i += 2
        elif nxt == "t":
            out += b"\t"
            i += 2
        else:
            out.append(int(s[i + 1:i + 3], 16))
            i += 3
    return out.decode()


def run_case(out, bindir, case):
    name, prog, cmd = case
    tool = str(bindir / cmd[0])
    argv = [tool] + cmd[1:] + [f"inputs/{prog}.mlir"]
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=out, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        (out / f"{name}.refused").write_text(f"exit {proc.returncode}\n{proc.stderr}")
        return name, "refused", seconds
    text = proc.stdout
    if cmd[0] == "tessel-opt":
        objects = _GPU_OBJECT.findall(text)
        if len(objects) != 1:
            (out / f"{name}.refused").write_text(f"no single gpu.object in the output\n{text}")
            return name, "refused", seconds
        text = unescape_mlir(objects[0])
    (out / f"{name}.ptx").write_text(text)
    if proc.stderr:
        (out / f"{name}.log").write_text(proc.stderr)
    return name, "ptx", seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=pathlib.Path, help="output directory (must not exist)")
    ap.add_argument("--build", type=pathlib.Path, default=ROOT / "build",
                    help="build directory with bin/tesselc, bin/tessel-opt, python/ (default: build)")
    ap.add_argument("--jobs", type=int, default=2, help="compiles at a time (default 2)")
    ap.add_argument("--only", metavar="REGEX", help="only the cases whose name matches REGEX")
    ap.add_argument("--list", action="store_true", help="print the case names and exit")
    args = ap.parse_args()
    out = args.out.resolve()
    build = args.build.resolve()
    bindir = build / "bin"
    if out.exists():
        sys.exit(f"ptx_corpus: {out} exists; give a new directory")
    start = time.monotonic()
    programs = write_inputs(out / "inputs", build)
    todo = cases(programs)
    if args.only:
        todo = [c for c in todo if re.search(args.only, c[0])]
    if args.list:
        for name, _, _ in todo:
            print(name)
        shutil.rmtree(out)
        return
    (out / "MANIFEST").write_text(
        "".join(f"{name}: {' '.join(cmd)} inputs/{prog}.mlir\n" for name, prog, cmd in todo))
    results = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for r in pool.map(lambda c: run_case(out, bindir, c), todo):
            results.append(r)
    compiled = sum(1 for _, kind, _ in results if kind == "ptx")
    refused = len(results) - compiled
    slowest = sorted(results, key=lambda r: -r[2])[:3]
    print(f"ptx_corpus: {len(results)} cases from {len(programs)} programs: {compiled} PTX, "
          f"{refused} refused ({time.monotonic() - start:.0f} s; slowest "
          + ", ".join(f"{n} {s:.1f} s" for n, _, s in slowest) + f") in {out}")


if __name__ == "__main__":
    main()
