"""The DSL front end: what IR a kernel traces to, specialisation, inspection, IR dumps."""
import os
import subprocess
import sys

import numpy as np

from dsl_helpers import BUILD
import tessel
from tessel import language as tl

F32 = np.zeros(64, dtype=np.float32)


@tessel.jit
def pair(a, b):
    return a + b, a * b


@tessel.jit
def k_features(x, n, flag, BLOCK: tl.constexpr, MODE: tl.constexpr):
    d = tl.make_desc(x, shape=(n, BLOCK), strides=(BLOCK, 1))
    t = tl.load(d, (0, 0), shape=(BLOCK, BLOCK), padding=float("-inf"))
    s, p = pair(t, 2.0)                       # inlined callee, tuple return
    r = tl.arange(0, BLOCK)
    col = r[:, None] + r[None, :]             # broadcasting of expand_dims
    if MODE == "sum":                         # folded at trace time
        m = tl.sum(s, axis=1)
    else:
        m = tl.max(s, axis=1)
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in range(0, n, 2):
        acc = tl.maximum(acc, m * i.to(tl.float32))
    if flag > 0:                              # run-time if with a yielded value
        acc = acc + 1.0
    else:
        acc = tl.exp2(acc)
    for c in (1, 2):                          # unrolled
        acc = acc * c
    w = tl.where(col > 3, p, 0.0).T
    tl.store(d, (0, 0), w + tl.sum(w, axis=0)[None, :] + acc[:, None])


def test_trace_builds_the_expected_ops():
    kern = k_features.warmup(F32, 8, 1, BLOCK=8, MODE="sum")
    ir = kern.asm["tile"]
    for op in ["tile.load", "padding = 0xFFF0000000000000", "tile.reduce sum", "scf.for",
               "scf.if", "math.exp2", "arith.maximumf", "tile.expand_dims", "tile.broadcast",
               "arith.select", "tile.trans", "tile.store", "arith.sitofp"]:
        assert op in ir, op
    assert "tile.reduce max" not in ir
    assert ir.count("arith.mulf") >= 3  # p, the loop, the unrolled pair
    assert "func.call" not in ir        # callees are inlined at trace time


def test_constexpr_values_specialise():
    a = k_features.warmup(F32, 8, 1, BLOCK=8, MODE="sum")
    b = k_features.warmup(F32, 16, 0, BLOCK=8, MODE="sum")
    c = k_features.warmup(F32, 8, 1, BLOCK=8, MODE="max")
    assert a is b                       # run-time values share a specialisation
    assert a is not c and "tile.reduce max" in c.asm["tile"]
    assert ("MODE", "constexpr", "str", "sum") in a.specialization
    assert a.cache_key != c.cache_key


def test_options_are_frozen_and_hashed():
    o = tessel.CompileOptions()
    try:
        o.pipeline = "x"
        raise AssertionError("options must be frozen")
    except Exception as e:
        assert "cannot assign" in str(e)
    assert o.digest() != tessel.CompileOptions(pipeline="canonicalize").digest()


def test_attention_ir_is_naive_then_streamed():
    q = np.zeros((1, 1, 40, 16), np.float32)
    kern = tessel.compile_attention(q, q, q, causal=True)
    tile, opt = kern.asm["tile"], kern.asm["tile-opt"]
    assert "tile.softmax" in tile and "streamed" in tile
    assert "tile.softmax" not in opt                 # made online by tile-optimize
    assert "math.exp2" in opt
    assert 'tile.block_mask = "all_true"' in opt      # causal blocks split by the mask analysis


def test_dump_ir_env_var_prints_every_pass():
    code = ("import numpy as np, tessel\n"
            "q = np.zeros((1, 1, 8, 16), np.float32)\n"
            "tessel.compile_attention(q, q, q)\n")
    env = dict(os.environ, TESSEL_DUMP_IR="1",
               PYTHONPATH=str(BUILD / "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "IR Dump After TileOnlineSoftmax" in r.stderr
    assert "IR Dump After Canonicalizer" in r.stderr
    env.pop("TESSEL_DUMP_IR")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert "IR Dump" not in r.stderr


def test_builder_reports_misuse_as_value_error():
    from tessel import _tessel
    b = _tessel.KernelBuilder()
    (x,) = b.begin_function("f", [("scalar", "i32")])
    f = b.const_float(1.0, "f32")
    try:
        b.binary("add", x, f)
        raise AssertionError("expected ValueError")
    except ValueError as e:
        assert "differ in type" in str(e)
