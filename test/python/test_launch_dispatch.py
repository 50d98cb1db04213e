"""kernel[grid](...) through the C dispatcher down to cuLaunchKernel, on the fake CUDA driver.

launch_worker.py runs the launches in a subprocess with TESSEL_LIBCUDA pointing at the fake
driver (test/FakeCuda: it records every launch's function, grid, block, stream and parameter
slots) and a stand-in torch module; these tests check what the driver received. No GPU and no
torch needed.
"""
import gc
import json
import os
import struct
import subprocess
import sys
import weakref

import numpy as np
import pytest

import tessel
from tessel import language as tl

import fakecuda

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    if not fakecuda.library_path().exists():
        pytest.fail(f"no fake driver at {fakecuda.library_path()} (build tessel_fake_cuda)")
    env = dict(os.environ, TESSEL_CACHE_DIR=str(tmp_path_factory.mktemp("cache")))
    env["PYTHONPATH"] = os.pathsep.join([HERE, env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, os.path.join(HERE, "launch_worker.py")],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    results = json.loads(r.stdout.strip().splitlines()[-1])
    crashed = {k: v["crashed"] for k, v in results.items() if "crashed" in v}
    assert not crashed, crashed
    return results


def f32(slot):
    return struct.unpack("<f", struct.pack("<I", slot & 0xFFFFFFFF))[0]


def test_arguments_are_packed_in_order(runs):
    r = runs["packing"]
    first = r["first"]
    assert first["slots"][:2] == [r["x"], r["y"]]
    assert first["slots"][2] == 1000
    assert (f32(first["slots"][3]), f32(first["slots"][4])) == (2.5, -1.0)
    assert first["grid"] == [3, 2, 1] and first["block"] == r["block"]
    assert first["launched"] == 1
    # A cache hit packs the new values, launches the same function.
    assert r["hit_f32"] == [999, 0.25, -3.0]
    assert r["hit"]["function"] == first["function"] and r["hit"]["launched"] == 1
    # kernel._call(grid, ...) (what tessel.attention uses) is the same path, constexpr by position.
    assert r["called"]["grid"] == [7, 1, 1] and r["called"]["slots"][2] == 5
    assert r["called"]["function"] == first["function"]
    assert r["slow_calls"] == 1 and r["fast_size"] == 1      # only the first call went slow


def test_float_scalars_key_by_range(runs):
    """A positive float in [2^-64, 2^64] keys a kernel specialised on it (tile.moderate: the
    softmax folds the scale without a run-time check); others key the generic kernel; the C
    dispatcher and the Python key agree, numpy floats included."""
    r = runs["float_ranges"]
    calls = r["calls"]
    fn = {name: c[0] for name, c in calls.items()}
    assert all(c[1] == 1 for c in calls.values())                  # every call launched once
    assert calls["neg"][2] == -2.5 and calls["edge"][2] == 2.0 ** 64  # the values reach it
    moderate = {"pos", "pos_again", "np_pos", "edge"}
    assert len({fn[n] for n in moderate}) == 1
    assert len({fn[n] for n in fn if n not in moderate}) == 1
    assert fn["pos"] != fn["neg"]
    assert r["keys"] == 2 and r["moderate_keys"] == 1 and r["moderate_ir"]
    # Compiles: pos, neg; numpy floats are new C keys (their type) for the same two kernels.
    assert r["slow_calls"] == 4 and r["fast_entries"] == 4


def test_floats_left_unspecialised_share_one_kernel(runs):
    """CompileOptions.do_not_specialize: the float keys by its type alone (Triton's option),
    so positive and negative values run the one generic kernel with their own values."""
    r = runs["unspecialised_floats"]
    calls = r["calls"]
    assert len({c[0] for c in calls.values()}) == 1 and all(c[1] == 1 for c in calls.values())
    assert [calls[n][2] for n in ("pos", "neg", "pos_again")] == [2.5, -2.5, 0.5]
    assert r["keys"] == [["a", "scalar", "f32", "any"]]
    assert r["moderate_args"] == [1]                # b (1.0) keeps its range, a does not
    # The C dispatcher still keys the range: the negative value is one more slow call (no
    # compile), the second positive one is fast.
    assert r["slow_calls"] == 2


def test_positional_keyword_and_default_bindings_are_one_key(runs):
    r = runs["binding"]
    for call in r["calls"]:
        assert call == [r["x"], r["y"], 8, 2.0, 1]
    assert r["fast_size"] == 1
    # The first call plus the six failing calls below reach the slow path (which explains them).
    assert r["slow_calls"] == 1 + 5


def test_calls_that_do_not_bind_get_python_errors(runs):
    e = runs["binding"]["errors"]
    assert e["missing"] == ["TypeError", "with_defaults(): missing a required argument: 'n'"]
    assert e["unknown"][0] == "TypeError" and "bogus" in e["unknown"][1]
    assert e["twice"][0] == "TypeError" and "multiple values for argument 'n'" in e["twice"][1]
    assert e["kwonly"][0] == "TypeError" and "too many positional" in e["kwonly"][1]
    assert e["string"][0] == "TypeError" and "cannot pass a str" in e["string"][1]
    assert e["unhashable"] == ["TypeError",
                               "scale_shift(): constexpr 'BLOCK' must be hashable, got list"]


def test_dtypes_and_constexprs_select_distinct_kernels(runs):
    r = runs["specialisation"]
    fn = r["functions"]
    assert len({fn["f32"], fn["f16"], fn["f32-32"]}) == 3
    assert fn["f32-again"] == fn["f32"] and fn["f16-again"] == fn["f16"]
    assert fn["i32-n"] == fn["f32"]          # a bool for an i32 scalar: its own key, same kernel
    assert all(n == 1 for n in r["launched"].values())
    assert r["slow_after_warm"] == 4 and r["fast_size"] == 4 and r["compiled"] == 3
    # Constexprs equal across types (True == 1) are distinct specialisations, as in Python keys.
    assert len(set(r["flags"].values())) == 4
    assert r["flag_entries"] == 4 and r["flag_compiled"] == 4


def test_wrong_arguments_are_errors_not_launches(runs):
    e = runs["errors"]
    assert e["f64"][0] == "TypeError" and "float64 are not supported" in e["f64"][1]
    # A CPU tensor of a known type and dtype is a cache hit: the driver's pointer check refuses it.
    assert e["cpu-hit"][0] == "ValueError" and "is not CUDA device memory" in e["cpu-hit"][1]
    assert e["cpu-first"][0] == "TypeError" and "torch tensor on cpu" in e["cpu-first"][1]
    assert e["other-device"] == ["ValueError",
                                 "argument 'y' of scale_shift is on cuda:1, the launch is on cuda:0"]
    assert e["overflow"][0] == "OverflowError" and "does not fit in an i32" in e["overflow"][1]
    assert e["bad-grid"] == ["ValueError", "a grid has 1 to 3 sizes, got 4"]
    assert e["grid-type"][0] == "TypeError"
    assert e["driver-fails"][0] == "CudaError" and "cuLaunchKernel failed" in e["driver-fails"][1]
    for name in ("f64", "cpu-hit", "cpu-first", "other-device", "overflow", "bad-grid",
                 "grid-type", "empty-grid", "driver-fails"):
        assert e[name + "-launched"] == 0, name
    assert e["empty-grid"] is None
    assert e["both-on-1"] is None and e["both-on-1-launched"] == 1
    assert e["after-failure"] is None and e["after-failure-launched"] == 1


def test_grids_and_the_current_stream(runs):
    r = runs["grid_and_stream"]
    assert r["callable"] == [4, 2, 1] and r["callable-hit"] == [1, 2, 1]
    assert r["meta"] == ["BLOCK", "a", "b", "n", "x", "y"]
    assert r["int"] == [5, 1, 1] and r["list"] == [2, 3, 4]
    assert r["streams"] == [0, 0x5000, 0x7000]     # asked on every launch, never cached
    assert r["device1-stream"] == 0x101            # asked for the arguments' device
    assert r["bound_repr"] == "<scale_shift[(1,)]>"


def test_pointer_checks_are_remembered(runs):
    assert runs["pointer_checks_are_remembered"]["queries"] == 0


def test_device_pointers_key_by_dtype_value(runs):
    r = runs["device_pointers"]
    assert r["r1"] == [r["a"], r["b"]] and r["r2"] == [r["b"], r["a"]]
    assert r["fast_size"] == 1 and r["same_function"]


def test_attention_launches(runs):
    r = runs["attention"]
    assert r["launched"] == 7 and len(set(r["outputs"])) == 6
    assert r["o_shape"] == [1, 2, 100, 64] and r["lse_shape"] == [1, 2, 100]
    assert r["slots"] == [r["q"], r["k"], r["k"], r["o4"]]
    # The fake devices are compute capability 9.0: sm_90a's 64-row blocks (wgmma) at d64.
    assert r["grid"] == [2, 2, 1] and r["nq"] == 100
    assert r["lse_slot"] == r["lse"]                 # return_lse: the LSE tensor returned
    s3, s4, s5, s6 = r["scratch"]
    assert s3 == s4 and s3 not in r["outputs"] and s3 != r["lse"]   # otherwise one scratch
    assert s5 != s3 and s6 == s5                     # grown for a larger call, then kept


def test_any_number_of_batch_heads_launches(runs):
    # 70,000 (b, h) rows: y keeps the largest divisor <= 65,535 (35,000), x the query block
    # times the other factor (1 block of 64 rows x 2); the fake driver refuses y > 65,535 as
    # the real one does, so launched == 1 means the grid was legal.
    r = runs["huge_batch_heads"]
    for call in ("slow", "lean"):
        assert r[call] == {"launched": 1, "grid": [2, 35000, 1]}
    assert r["small"]["grid"] == [2, 15, 1]          # below the cap: (query blocks, b·h)


def test_serving_entry_points_launch(runs):
    r = runs["serving"]
    assert r["launched"] == 2 and r["shapes"] == [[300, 8, 128], [3, 1, 8, 128]]
    v = r["varlen"]
    # d128 f16 on the fake sm_90a: serving_checks.VARLEN_BLOCKS' 128-row blocks; ceil(200 /
    # 128) = 2 blocks x (3 x 8) rows.
    assert v["grid"] == [2, 24, 1]
    assert v["slots"] == [r["ptrs"][0], r["ptrs"][1], r["ptrs"][1], v["o"]]    # read in place
    assert v["ints"] == [3, 300, 500, 8, 2, 200]             # B, totals, H, Hkv, max_seqlen_q
    p = r["paged"]                                            # num_splits=1
    assert p["grid"] == [1, 24, 1]
    assert p["ints"] == [3, 1, 640, 8, 2, 5]                  # B, Sq, 40 pages x 16 rows, ...
    # Decode by default: one program per (split, batch, KV head), here 1 split (5 key blocks):
    # q and the cache read in place, no combine.
    d = r["decode"]
    assert d["launches"] == 1 and d["grid"] == [1, 6, 1] and d["slots"] == r["qc"]
    assert d["ints"] == [3, 1, 4, 640, 2, 5]                  # B, Sq, G, cache rows, Hkv, pages
    # Three splits: the split program, then the combine over (query block, batch x query head).
    assert r["split"] == {"launches": 2, "combine_grid": [1, 24, 1]}
    # The decode call again with new tensors of the same shapes: its kept plan (no new one),
    # one launch reading the new q, cache, seqlens and table, writing a new o.
    a = r["again"]
    assert a["new_plans"] == 0 and a["launches"] == 1 and a["grid"] == d["grid"]
    q2, k2, v2, o2, s2, t2 = a["ptrs"]
    assert a["slots"][:3] == [q2, k2, v2] and a["slots"][3] == o2 and a["slots"][5:7] == [s2, t2]
    assert o2 != a["first_o"] and a["ints"] == d["ints"]


def test_kvcache_append_calls_keep_plans(runs):
    for name, launches in (("plain", 2), ("rotary", 4)):      # (rotate q, rotate k,) append
        first, again = runs["kvcache_append_plans"][name]
        assert first["launches"] == again["launches"] == launches, name
        assert first["new_plans"] == 1 and again["new_plans"] == 0, name
        # The attention (the last launch) reads the new call's cache, writes its new o, and
        # takes the appended lengths: a new tensor, not the caller's cache_seqlens.
        q, kc, vc, o, seqlens = again["ptrs"]
        assert again["slots"][1:4] == [kc, vc, o] and seqlens not in again["slots"], name
        assert (again["slots"][0] == q) == (name == "plain"), name   # else the rotated q


def test_gated_serving_calls_wait_then_launch(runs):
    r = runs["gated_serving_calls"]
    p = r["ptrs"]
    for name in ("leftpad", "varlen_paged"):
        assert "waits for its GPU check" in r[name]["refused"], name
        assert r[name]["launches"] == 1, name
    # kvcache_kernel: q, caches, o, lse, seqlens, table, 7 scalars, then the paddings.
    lp = r["leftpad"]
    assert lp["grid"] == [1, 24, 1] and lp["slots"][:3] == [p["q"], p["kc"], p["kc"]]
    assert lp["slots"][5:7] == [p["seqlens"], p["table"]] and lp["slots"][14] == p["pad"]
    # varlen_cache_kernel: q, caches, o, lse, cu_seqlens_q, the key counts (seqused_k), table;
    # ceil(7 / 64) query blocks x (3 sequences x 8 heads).
    vp = r["varlen_paged"]
    assert vp["grid"] == [1, 24, 1] and vp["slots"][:3] == [p["qv"], p["kc"], p["kc"]]
    assert vp["slots"][5:8] == [p["cu"], p["seqlens"], p["table"]]
    a = r["again"]
    q2, k2, cu2, used2, table2 = a["ptrs"]
    assert a["launches"] == 1 and a["new_plans"] == 0
    assert a["slots"][:3] == [q2, k2, k2] and a["slots"][5:8] == [cu2, used2, table2]
    # Decode steps packed: the split program and its combine, then varlen_cache_kernel (the
    # last launch, on the call's tensors); a plan of its own (the switch is in the key).
    packed, again = r["packed"], r["packed_again"]
    assert packed["launches"] == again["launches"] == 3
    assert packed["new_plans"] == 1 and again["new_plans"] == 0
    assert again["slots"][:3] == [q2, k2, k2] and again["slots"][5:8] == [cu2, used2, table2]


# --- in this process (no driver needed) -------------------------------------------------------

def test_captured_tensors_are_launch_arguments(runs):
    r = runs["captured"]
    assert r["launched"] == 2 and r["same_function"]       # the second tensor: no new kernel
    for doc, slots in zip(r["docs"], r["capture_slots"]):
        assert slots == [doc, 1, 100, 100, 1]               # pointer, shape, strides
    # 64-row blocks (given: the fast path's, which gathers into registers).
    assert r["grid"] == [2, 2, 1]
    cpu, host = r["refused"]
    assert cpu[0] == "CapturedTensorError" and "is a CPU tensor, but the kernel runs on the GPU" \
        in cpu[1]
    assert "is a numpy array, but the kernel runs on the GPU" in host[1]


def test_dispatcher_is_collected():
    def kern(x, n, B: tl.constexpr):
        d = tl.make_desc(x, shape=(n,), strides=(1,))
        tl.store(d, (0,), tl.load(d, (0,), shape=(B,)))
    # A module-level @jit lives forever; one made here must not leak (its dict holds a method
    # bound to it, and the fast table holds the interpreter entry: a cycle through C).
    k = tessel.jit(kern)
    x = np.zeros(4, np.float32)
    k[(1,)](x, 4, B=4)
    assert k._fast_size() == 1
    ref = weakref.ref(k)
    del k
    gc.collect()
    assert ref() is None


def test_signatures_with_varargs_take_the_slow_path():
    def kern(x, *rest):
        pass
    k = tessel.jit(kern)
    assert not k._fast_path
    with pytest.raises(TypeError, match="argument 'rest': cannot pass a tuple"):
        k[(1,)](np.zeros(4, np.float32))   # bound by inspect, refused by the classifier


def test_bound_grid_is_reusable():
    x = np.arange(8, dtype=np.float32)
    y = np.zeros_like(x)

    @tessel.jit
    def double(x, y, n, B: tl.constexpr):
        xd = tl.make_desc(x, shape=(n,), strides=(1,))
        yd = tl.make_desc(y, shape=(n,), strides=(1,))
        tl.store(yd, (0,), tl.load(xd, (0,), shape=(B,)) * 2.0)
    launch = double[(1,)]
    launch(x, y, 8, B=8)
    np.testing.assert_allclose(y, x * 2)
    y[:] = 0
    launch(x, y, 8, B=8)
    np.testing.assert_allclose(y, x * 2)
    assert double._fast_size() == 1
