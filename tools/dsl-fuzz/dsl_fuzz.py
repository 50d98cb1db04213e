"""A DSL-level fuzzer: random kernels through @tessel.jit on the interpreter, checked against numpy.

    PYTHONPATH=build/python python3 tools/dsl-fuzz/dsl_fuzz.py [--seconds 600] [--seed 1] [--out DIR]

Each program is a small kernel written to a file of its own (the front end reads the source):
loads of two or three f32 tiles, a random expression over them (arithmetic, tl.exp / abs /
maximum / minimum, comparisons and tl.where, row reductions broadcast back, a dot of f16 casts),
and a store. Well-typed programs run on the interpreter and must match a float64 numpy reference
within f32 tolerances; ill-typed ones (mismatched shapes, a dot that does not contract, an
unknown tl function, a run-time value where a constexpr is needed) must raise
tessel.CompilationError located in the program's file. Anything else — another exception type,
a mismatch, a crash of the process — is a finding; the program is saved under --out.
"""
import argparse
import importlib.util
import pathlib
import random
import re
import sys
import tempfile
import time
import traceback

import numpy as np

import tessel
from tessel import language as tl  # noqa: F401  (the generated programs import it)

LEAVES = ("a", "b", "c")


class Gen:
    """Random expressions as (python source, numpy function of the env, kind)."""

    def __init__(self, rng, rows, cols):
        self.rng = rng
        self.rows, self.cols = rows, cols

    def expr(self, depth):
        r = self.rng
        if depth <= 0 or r.random() < 0.2:
            if r.random() < 0.8:
                name = r.choice(LEAVES)
                return name, (lambda env, n=name: env[n])
            c = round(r.uniform(-2, 2), 3)
            return repr(c), (lambda env, c=c: env["T"](c))
        choice = r.randrange(9)
        if choice < 3:
            op = r.choice(["+", "-", "*"])
            (sa, fa), (sb, fb) = self.expr(depth - 1), self.expr(depth - 1)
            f = {"+": np.add, "-": np.subtract, "*": np.multiply}[op]
            return f"({sa} {op} {sb})", (lambda env: f(fa(env), fb(env)))
        if choice == 3:
            fn = r.choice(["maximum", "minimum"])
            (sa, fa), (sb, fb) = self.expr(depth - 1), self.expr(depth - 1)
            npf = getattr(np, fn)
            return f"tl.{fn}({sa}, {sb})", (lambda env: npf(fa(env), fb(env)))
        if choice == 4:
            sa, fa = self.expr(depth - 1)
            # exp of something bounded, so both sides stay finite
            return f"tl.exp(tl.minimum({sa}, 8.0))", (lambda env: np.exp(np.minimum(fa(env), 8.0)))
        if choice == 5:
            sa, fa = self.expr(depth - 1)
            return f"tl.abs({sa})", (lambda env: np.abs(fa(env)))
        if choice == 6:
            (sa, fa), (sb, fb) = self.expr(depth - 1), self.expr(depth - 1)
            (sx, fx), (sy, fy) = self.expr(depth - 1), self.expr(depth - 1)
            return (f"tl.where({sa} > {sb}, {sx}, {sy})",
                    lambda env: np.where(fa(env) > fb(env), fx(env), fy(env)))
        if choice == 7:
            sa, fa = self.expr(depth - 1)
            red = r.choice(["sum", "max"])
            npf = {"sum": np.sum, "max": np.max}[red]

            def f(env, fa=fa, npf=npf):
                v = np.broadcast_to(fa(env), (self.rows, self.cols))
                return npf(v, axis=1)[:, None]
            # a scalar operand broadcast to the tile first, as the kernel does with `+ a * 0.0`
            return f"tl.{red}(({sa}) + a * 0.0, axis=1)[:, None]", f
        sa, fa = self.expr(depth - 1)
        sb, fb = self.expr(depth - 1)
        if self.rows != self.cols:
            return f"({sa} + {sb})", (lambda env: fa(env) + fb(env))

        def dot(env):
            x = np.broadcast_to(fa(env), (self.rows, self.cols)).astype(np.float16)
            y = np.broadcast_to(fb(env), (self.rows, self.cols)).astype(np.float16)
            return x.astype(np.float64) @ y.astype(np.float64).T
        return (f"tl.dot(tl.cast(({sa}) + a * 0.0, tl.float16), "
                f"tl.trans(tl.cast(({sb}) + a * 0.0, tl.float16)))", dot)


TEMPLATE = '''\
import tessel
from tessel import language as tl


@tessel.jit
def k(x, y, z, o, R: tl.constexpr, C: tl.constexpr):
    dx = tl.make_desc(x, shape=(R, C), strides=(C, 1))
    dy = tl.make_desc(y, shape=(R, C), strides=(C, 1))
    dz = tl.make_desc(z, shape=(R, C), strides=(C, 1))
    do = tl.make_desc(o, shape=(R, C), strides=(C, 1))
    a = tl.load(dx, (0, 0), shape=(R, C))
    b = tl.load(dy, (0, 0), shape=(R, C))
    c = tl.load(dz, (0, 0), shape=({crows}, C))
    r = {expr}
    tl.store(do, (0, 0), r + a * 0.0{use_c})
'''

# Ill-typed programs: (what to replace, with) applied to a well-typed one; each must raise
# CompilationError.
BREAKAGES = [
    ("r = ", "r = tl.dot(a, a, tl.zeros((R + 1, C))) + "),     # dot accumulator of another shape
    ("r = ", "r = tl.no_such_function(a) + "),                  # unknown tl function
    ("r = ", "r = tl.load(dx, (0, 0), shape=(x, C)) + "),       # run-time value for a shape
    ("r = ", "r = tl.sum(a, axis=5) + "),                       # axis out of range
    ("r = ", "r = tl.broadcast_to(tl.zeros((2, 3)), (3, 3)) + "),  # no broadcast
]


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.k


def one(rng, work, index):
    """('ok' | 'refused' | 'finding', source, detail)."""
    rows = rng.choice([1, 2, 4, 8, 16])
    cols = rows if rng.random() < 0.4 else rng.choice([1, 4, 8, 16, 32])
    gen = Gen(rng, rows, cols)
    source_expr, ref = gen.expr(rng.randrange(1, 6))
    broken = rng.random() < 0.25
    crows = rows
    if broken and rows > 1 and rng.random() < 0.5 and re.search(r"\bc\b", source_expr):
        crows = rows + 1             # c of another shape, used in the expression: a shape error
        breakage = None
    elif broken:
        breakage = rng.choice(BREAKAGES)
    else:
        breakage = None
    # A c of another shape is always used (a folded tl.where could otherwise drop it).
    src = TEMPLATE.format(expr=source_expr, crows=crows if crows != rows else "R",
                          use_c=" + c * 0.0" if crows != rows else "")
    if breakage:
        src = src.replace(*breakage, 1)
    path = work / f"p{index}.py"
    path.write_text(src)
    x, y, z = (rng_arrays(rng, crows if n == "c" else rows, cols) for n in LEAVES)
    o = np.zeros((rows, cols), np.float32)
    try:
        kernel = load(path, f"dslfuzz_{index}")
        kernel[(1,)](x, y, z, o, R=rows, C=cols)
    except tessel.CompilationError as err:
        if broken:
            if err.filename != str(path):
                return "finding", src, f"error not located in the program: {err}"
            return "refused", src, ""
        return "finding", src, f"well-typed program refused: {err}"
    except Exception:
        return "finding", src, traceback.format_exc()
    if broken:
        return "finding", src, "ill-typed program accepted"
    # Two references: float64, and float32 op by op like the interpreter. A comparison of two
    # values that are equal in exact arithmetic (max(a, c) + a vs a + max(a, c)) can go either
    # way with rounding, and then tl.where picks another operand: the program is correct if it
    # matches either.
    worst = None
    for t in (np.float64, np.float32):
        env = {"a": x.astype(t), "b": y.astype(t), "c": z.astype(t), "T": t}
        with np.errstate(all="ignore"):
            want = np.broadcast_to(ref(env), (rows, cols)).astype(np.float32)
        # A dot rounds its operands to f16: one f16 ulp of an operand moves the result further.
        tol = 1e-2 if "tl.dot" in source_expr else 2e-3
        if np.allclose(o, want, rtol=tol, atol=tol, equal_nan=True):
            return "ok", src, ""
        worst = np.nanmax(np.abs(o.astype(np.float64) - want))
    return "finding", src, f"mismatch: max abs difference {worst}"


def rng_arrays(rng, rows, cols):
    g = np.random.default_rng(rng.randrange(1 << 30))
    return g.uniform(-2, 2, (rows, cols)).astype(np.float32)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default="dsl-fuzz-findings")
    args = p.parse_args(argv)
    rng = random.Random(args.seed)
    counts = {"ok": 0, "refused": 0, "finding": 0}
    out = pathlib.Path(args.out)
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="dsl-fuzz-") as tmp:
        work = pathlib.Path(tmp)
        i = 0
        while time.time() - start < args.seconds:
            status, src, detail = one(rng, work, i)
            counts[status] += 1
            if status == "finding":
                out.mkdir(parents=True, exist_ok=True)
                (out / f"finding-{args.seed}-{i}.py").write_text(src + "\n# " +
                                                                  detail.replace("\n", "\n# "))
                print(f"finding {i}: {detail.splitlines()[-1] if detail else ''}", flush=True)
            i += 1
    print(f"{i} programs in {time.time() - start:.0f} s: {counts['ok']} ran and matched numpy, "
          f"{counts['refused']} ill-typed refused with a located error, {counts['finding']} "
          "findings")
    return 1 if counts["finding"] else 0


if __name__ == "__main__":
    sys.exit(main())
