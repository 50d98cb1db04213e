"""Runs kernel launches on the fake CUDA driver (test/FakeCuda) and prints what the driver saw,
as JSON on the last line. test_launch_dispatch.py runs it in a subprocess (the driver is opened
once per process, and the other tests need a process without one).

Each scenario records its observations, or the exception it raised as [type name, message].
"""
import json
import sys
import traceback

import fakecuda
import numpy as np

DRV = fakecuda.install()
torch = fakecuda.fake_torch(DRV)
state = {"stream": 0}
torch._C._cuda_getCurrentRawStream = lambda device: state["stream"] + device

import tessel  # noqa: E402
from tessel import language as tl  # noqa: E402
from launch_kernels import scale_shift, with_defaults  # noqa: E402
from tessel import serving_checks, varlen_cache  # noqa: E402

# The routes that build index tensors with torch ops (the varlen kernels' compact grid's map, the
# few-queries gather) need a real torch, which the fake one is not: the scenarios take the
# launches without them (those routes' launches are checked on the GPU, test_serving_gpu.py).
serving_checks.VARLEN_TILES_CUDA = varlen_cache.FEW_QUERIES_PACKED_CUDA = False

T = torch.Tensor


@tessel.jit
def copy(x, y, n, BLOCK: tl.constexpr):
    xd = tl.make_desc(x, shape=(n,), strides=(1,))
    yd = tl.make_desc(y, shape=(n,), strides=(1,))
    pid = tl.program_id(0)
    tl.store(yd, (pid * BLOCK,), tl.load(xd, (pid * BLOCK,), shape=(BLOCK,)))


@tessel.jit
def flagged(x, n, FLAG: tl.constexpr):
    d = tl.make_desc(x, shape=(n,), strides=(1,))
    t = tl.load(d, (0,), shape=(4,))
    if FLAG:
        t = t * 2.0
    tl.store(d, (0,), t)


class SlowCounter:
    """Counts the calls that reach the Python slow path of a kernel."""

    def __init__(self, kernel):
        self.n = 0
        original = kernel._slow

        def counted(*args, **kwargs):
            self.n += 1
            return original(*args, **kwargs)
        kernel._slow = counted   # an instance attribute: the C dispatcher looks it up by name


def error(e):
    return [type(e).__name__, str(e)]


def last(n):
    DRV.record_params(n)
    return DRV.last_launch()


def launch_record(fn, nparams):
    DRV.record_params(nparams)
    before = DRV.launches()
    fn()
    d = DRV.last_launch()
    d["launched"] = DRV.launches() - before
    return d


NAN = float("nan")

SCENARIOS = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


@scenario
def packing():
    x, y = T((1000,), torch.float32), T((1000,), torch.float32)
    slow = SlowCounter(scale_shift)
    first = launch_record(lambda: scale_shift[(3, 2)](x, y, 1000, 2.5, -1.0, BLOCK=256), 5)
    hit = launch_record(lambda: scale_shift[(3, 2)](x, y, 999, 0.25, -3.0, BLOCK=256), 5)
    called = launch_record(lambda: scale_shift._call(7, x, y, 5, 1.0, -1.0, 256), 5)
    kernel = scale_shift.warmup(x, y, 1, 1.0, 1.0, BLOCK=256)
    return {"x": x.ptr, "y": y.ptr, "first": first, "hit": hit, "called": called,
            "block": list(kernel.binary().block), "slow_calls": slow.n,
            "fast_size": scale_shift._fast_size(),
            "hit_f32": [fakecuda.slot_i32(hit["slots"][2]), fakecuda.slot_f32(hit["slots"][3]),
                        fakecuda.slot_f32(hit["slots"][4])]}


@scenario
def float_ranges():
    """Float scalars key by range (runtime.float_range): moderate (2^-64..2^64) or any."""
    x, y = T((64,), torch.float32), T((64,), torch.float32)
    slow = SlowCounter(scale_shift)
    fast_before = scale_shift._fast_size()
    out = {}
    for name, a in (("pos", 2.5), ("neg", -2.5), ("zero", 0.0), ("huge", 1e30), ("nan", NAN),
                    ("pos_again", 0.5), ("np_pos", np.float32(2.5)), ("np_neg", np.float32(-1)),
                    ("tiny", 2.0 ** -65), ("edge", 2.0 ** 64)):
        r = launch_record(lambda: scale_shift[(1,)](x, y, 64, a, 1.0, BLOCK=64), 5)
        out[name] = [r["function"], r["launched"], fakecuda.slot_f32(r["slots"][3])]
    keys = [k for k in scale_shift.cache if k[-1][-1] == 64]      # BLOCK=64: this scenario's
    moderate = [k for k in keys if k[3][-1] == "moderate"]
    return {"calls": out, "slow_calls": slow.n,
            "fast_entries": scale_shift._fast_size() - fast_before,
            "keys": len(keys), "moderate_keys": len(moderate),
            "moderate_ir": "tile.moderate" in scale_shift.cache[moderate[0]][0].asm["tile"]}


@scenario
def unspecialised_floats():
    """do_not_specialize=("a",): `a` keys by its type alone: one kernel, `b` alone marked
    tile.moderate."""
    x, y = T((64,), torch.float32), T((64,), torch.float32)
    generic = scale_shift.with_options(do_not_specialize=("a",))
    slow = SlowCounter(generic)
    out = {}
    for name, a in (("pos", 2.5), ("neg", -2.5), ("pos_again", 0.5)):
        r = launch_record(lambda: generic[(1,)](x, y, 64, a, 1.0, BLOCK=64), 5)
        out[name] = [r["function"], r["launched"], fakecuda.slot_f32(r["slots"][3])]
    keys = list(generic.cache)
    return {"calls": out, "slow_calls": slow.n, "keys": [k[3] for k in keys],
            "moderate_args": [generic.cache[k][0].asm["tile"].count("tile.moderate")
                              for k in keys]}


@scenario
def binding():
    x, y = T((64,), torch.float32), T((64,), torch.float32)
    slow = SlowCounter(with_defaults)
    out = []
    for call in (lambda: with_defaults[(2,)](x, y, 8),
                 lambda: with_defaults[(2,)](x, y, n=8),
                 lambda: with_defaults[(2,)](y=y, x=x, n=8, a=2.0),
                 lambda: with_defaults[(2,)](x, y, 8, 2.0, BLOCK=4)):
        r = launch_record(call, 4)
        out.append([r["slots"][0], r["slots"][1], fakecuda.slot_i32(r["slots"][2]),
                    fakecuda.slot_f32(r["slots"][3]), r["launched"]])
    errors = {}
    for name, call in (("missing", lambda: with_defaults[(2,)](x, y)),
                       ("unknown", lambda: with_defaults[(2,)](x, y, 8, bogus=1)),
                       ("twice", lambda: with_defaults[(2,)](x, y, 8, n=8)),
                       ("kwonly", lambda: with_defaults[(2,)](x, y, 8, 2.0, 4)),
                       ("string", lambda: with_defaults[(2,)](x, y, "8")),
                       ("unhashable", lambda: scale_shift[(1,)](x, y, 8, 1.0, 1.0, BLOCK=[4]))):
        try:
            call()
            errors[name] = None
        except Exception as e:  # noqa: BLE001
            errors[name] = error(e)
    return {"x": x.ptr, "y": y.ptr, "calls": out, "slow_calls": slow.n,
            "fast_size": with_defaults._fast_size(), "errors": errors}


@scenario
def specialisation():
    x32, y32 = T((64,), torch.float32), T((64,), torch.float32)
    x16, y16 = T((64,), torch.float16), T((64,), torch.float16)
    slow = SlowCounter(copy)
    f = {}
    f["f32"] = launch_record(lambda: copy[(1,)](x32, y32, 64, BLOCK=64), 0)
    f["f16"] = launch_record(lambda: copy[(1,)](x16, y16, 64, BLOCK=64), 0)
    f["f32-32"] = launch_record(lambda: copy[(2,)](x32, y32, 64, BLOCK=32), 0)
    f["f32-again"] = launch_record(lambda: copy[(1,)](x32, y32, 64, BLOCK=64), 0)
    f["f16-again"] = launch_record(lambda: copy[(1,)](x16, y16, 64, BLOCK=64), 0)
    f["i32-n"] = launch_record(lambda: copy[(1,)](x32, y32, True, BLOCK=64), 0)
    slow_after_warm = slow.n
    flags = {}
    for v in (True, 1, False, 0, 1):
        flags[repr(v)] = launch_record(lambda: flagged[(1,)](x32, 4, FLAG=v), 0)["function"]
    return {"functions": {k: v["function"] for k, v in f.items()},
            "launched": {k: v["launched"] for k, v in f.items()},
            "slow_after_warm": slow_after_warm, "fast_size": copy._fast_size(),
            "compiled": len(copy.cache), "flags": flags,
            "flag_entries": flagged._fast_size(), "flag_compiled": len(flagged.cache)}


@scenario
def errors():
    x, y = T((64,), torch.float32), T((64,), torch.float32)
    out = {}

    def attempt(name, call):
        before = DRV.launches()
        try:
            call()
            out[name] = None
        except Exception as e:  # noqa: BLE001
            out[name] = error(e)
        out[name + "-launched"] = DRV.launches() - before

    scale_shift[(1,)](x, y, 64, 1.0, 0.0, BLOCK=64)   # a warm entry: the rest are cache hits
    attempt("f64", lambda: scale_shift[(1,)](T((64,), torch.float64), y, 64, 1.0, 0.0, BLOCK=64))
    cpu = T((64,), torch.float32, device="cpu")
    attempt("cpu-hit", lambda: scale_shift[(1,)](cpu, y, 64, 1.0, 0.0, BLOCK=64))
    other = T((64,), torch.float32, device="cuda:1")
    attempt("other-device", lambda: scale_shift[(1,)](x, other, 64, 1.0, 0.0, BLOCK=64))
    attempt("both-on-1", lambda: scale_shift[(1,)](T((64,), torch.float32, device="cuda:1"),
                                                   other, 64, 1.0, 0.0, BLOCK=64))
    attempt("overflow", lambda: scale_shift[(1,)](x, y, 2 ** 31, 1.0, 0.0, BLOCK=64))
    attempt("bad-grid", lambda: scale_shift[(1, 2, 3, 4)](x, y, 64, 1.0, 0.0, BLOCK=64))
    attempt("grid-type", lambda: scale_shift["x"](x, y, 64, 1.0, 0.0, BLOCK=64))
    attempt("empty-grid", lambda: scale_shift[(0,)](x, y, 64, 1.0, 0.0, BLOCK=64))
    DRV.fail_next_launch(1)
    attempt("driver-fails", lambda: scale_shift[(1,)](x, y, 64, 1.0, 0.0, BLOCK=64))
    attempt("after-failure", lambda: scale_shift[(1,)](x, y, 64, 1.0, 0.0, BLOCK=64))
    # A CPU tensor on the first call of its kind: the slow path says what is wrong.
    fresh = tessel.jit(with_defaults.fn)
    attempt("cpu-first", lambda: fresh[(1,)](cpu, cpu, 64))
    return out


@scenario
def grid_and_stream():
    x, y = T((1000,), torch.float32), T((1000,), torch.float32)
    out = {}
    seen = []

    def grid(meta):
        seen.append(sorted(meta))
        return (-(-meta["n"] // meta["BLOCK"]), 2)
    out["callable"] = launch_record(lambda: scale_shift[grid](x, y, 1000, 1.0, 0.0, BLOCK=256),
                                    0)["grid"]
    out["callable-hit"] = launch_record(
        lambda: scale_shift[grid](x, y, 100, 1.0, 0.0, BLOCK=256), 0)["grid"]
    out["meta"] = seen[-1]
    out["int"] = launch_record(lambda: scale_shift[5](x, y, 1000, 1.0, 0.0, BLOCK=256), 0)["grid"]
    out["list"] = launch_record(lambda: scale_shift[[2, 3, 4]](x, y, 1000, 1.0, 0.0, BLOCK=256),
                                0)["grid"]
    streams = []
    for s in (0, 0x5000, 0x7000):
        state["stream"] = s
        streams.append(launch_record(lambda: scale_shift[(1,)](x, y, 1000, 1.0, 0.0, BLOCK=256),
                                     0)["stream"])
    state["stream"] = 0
    on1 = T((1000,), torch.float32, device="cuda:1")
    state["stream"] = 0x100
    out["device1-stream"] = launch_record(
        lambda: scale_shift[(1,)](on1, on1, 1000, 1.0, 0.0, BLOCK=256), 0)["stream"]
    state["stream"] = 0
    out["streams"] = streams
    out["bound_repr"] = repr(scale_shift[(1,)])
    return out


@scenario
def pointer_checks_are_remembered():
    x, y = T((64,), torch.float32), T((64,), torch.float32)
    scale_shift[(1,)](x, y, 64, 1.0, 0.0, BLOCK=64)
    q0 = DRV.pointer_queries()
    for _ in range(100):
        scale_shift[(1,)](x, y, 64, 1.0, 0.0, BLOCK=64)
    return {"queries": DRV.pointer_queries() - q0}


@scenario
def device_pointers():
    a = DRV.device_address(0, 1 << 20)
    b = DRV.device_address(0, 2 << 20)
    k = tessel.jit(scale_shift.fn)
    r1 = launch_record(lambda: k[(1,)](tessel.DevicePointer(a, "f32"), tessel.DevicePointer(b, "f32"),
                                       8, 1.0, 0.0, BLOCK=8), 2)
    # An equal dtype that is not the same string object, and a torch-style dtype name.
    r2 = launch_record(lambda: k[(1,)](tessel.DevicePointer(b, "".join(["f", "32"])),
                                       tessel.DevicePointer(a, "float32"), 8, 1.0, 0.0,
                                       BLOCK=8), 2)
    return {"a": a, "b": b, "r1": r1["slots"], "r2": r2["slots"], "fast_size": k._fast_size(),
            "same_function": r1["function"] == r2["function"]}


@scenario
def attention():
    q = T((1, 2, 100, 64), torch.float16)
    k = T((1, 2, 100, 64), torch.float16)
    before = DRV.launches()
    DRV.record_params(10)
    o = tessel.attention(q, k, k, causal=True)                         # the slow path, first
    o2, lse = tessel.attention(q, k, k, causal=True, return_lse=True)
    lse_slot = DRV.last_launch()["slots"][4]
    o3 = tessel.attention(q, k, k, causal=True)
    scratch3 = DRV.last_launch()["slots"][4]
    o4 = tessel.attention(q, k, k, causal=True)
    rec = DRV.last_launch()
    big = T((2, 4, 300, 64), torch.float16)
    tessel.attention(big, big, big)        # a new configuration: the slow path allocates
    o5 = tessel.attention(big, big, big)   # the lean path: the scratch grows
    scratch5 = DRV.last_launch()["slots"][4]
    o6 = tessel.attention(q, k, k, causal=True)
    scratch6 = DRV.last_launch()["slots"][4]
    return {"launched": DRV.launches() - before, "o_shape": list(o.shape),
            "lse_shape": list(lse.shape), "lse": lse.ptr, "lse_slot": lse_slot,
            "outputs": [x.ptr for x in (o, o2, o3, o4, o5, o6)],
            "scratch": [scratch3, rec["slots"][4], scratch5, scratch6],
            "slots": rec["slots"][:4], "q": q.ptr, "k": k.ptr, "o4": o4.ptr,
            "grid": rec["grid"], "nq": fakecuda.slot_i32(rec["slots"][5])}


@scenario
def captured():
    """A mask_mod over a captured CUDA tensor: its pointer, shape and strides follow the
    attention arguments; a new tensor reuses the kernel; a host tensor is refused. Blocks are
    given, so the dense kernel runs (without them tessel builds a block mask first)."""
    q = T((1, 2, 100, 64), torch.float16)
    docs = [T((1, 100), torch.int32), T((1, 100), torch.int32)]

    def make(doc):
        return lambda b, h, q_idx, kv_idx: doc[b, q_idx] == doc[b, kv_idx]
    before = DRV.launches()
    records = []
    for doc in docs:
        DRV.record_params(15)
        tessel.attention(q, q, q, mask_mod=make(doc), block_m=64, block_n=64)
        records.append(DRV.last_launch())
    refused = []
    for bad in (T((1, 100), torch.int32, device="cpu"), __import__("numpy").zeros((1, 100))):
        try:
            tessel.attention(q, q, q, mask_mod=make(bad), block_m=64, block_n=64)
            refused.append(None)
        except Exception as e:  # noqa: BLE001
            refused.append(error(e))
    return {"launched": DRV.launches() - before, "docs": [d.ptr for d in docs],
            "capture_slots": [r["slots"][10:15] for r in records],
            "same_function": records[0]["function"] == records[1]["function"],
            "grid": records[0]["grid"], "refused": refused}


@scenario
def huge_batch_heads():
    """b·h past CUDA's 65,535 programs along y (issue 12): 1,750 x 40 heads of 16 tokens."""
    q = T((1750, 40, 16, 64), torch.float16)
    DRV.record_params(10)
    out = {}
    for name in ("slow", "lean"):       # the first call through _prepare_cuda, then the lean path
        before = DRV.launches()
        tessel.attention(q, q, q, causal=True)
        rec = DRV.last_launch()
        out[name] = {"launched": DRV.launches() - before, "grid": rec["grid"]}
    small = T((3, 5, 100, 64), torch.float16)
    tessel.attention(small, small, small)
    out["small"] = {"grid": DRV.last_launch()["grid"]}
    return out


@scenario
def serving():
    """attention_varlen and attention_with_kvcache (paged) through the GPU path: compiled for
    the fake sm_90 device (the reference lowering), launched; the grid and the scalars."""
    DRV.record_params(14)
    q, k = T((300, 8, 128), torch.float16), T((500, 2, 128), torch.float16)
    cu = T((4,), torch.int32)
    before = DRV.launches()
    o = tessel.attention_varlen(q, k, k, cu, cu, 200, 300, causal=True)
    varlen = DRV.last_launch()
    qc, pages = T((3, 1, 8, 128), torch.float16), T((40, 16, 2, 128), torch.float16)
    seqlens, table = T((3,), torch.int32), T((3, 5), torch.int32)
    oc = tessel.attention_with_kvcache(qc, pages, pages, seqlens, block_table=table,
                                       num_splits=1)
    paged = DRV.last_launch()
    launched = DRV.launches() - before
    # Decode (Sq = 1): the split-KV path; the heuristic's one split writes o itself.
    before = DRV.launches()
    tessel.attention_with_kvcache(qc, pages, pages, seqlens, block_table=table)
    decode = DRV.last_launch()
    decode_launches = DRV.launches() - before
    before = DRV.launches()
    DRV.record_params(9)                  # the combine program has 9 parameters
    tessel.attention_with_kvcache(qc, pages, pages, seqlens, block_table=table, num_splits=3)
    combine = DRV.last_launch()
    split_launches = DRV.launches() - before
    # The same call signature with other tensors: the plan kept by the first call (no checks
    # again), launched on the new tensors, into a new output.
    from tessel import serving
    plans = len(serving._PLANS)
    DRV.record_params(14)
    qc2, pages2 = T((3, 1, 8, 128), torch.float16), T((40, 16, 2, 128), torch.float16)
    seqlens2, table2 = T((3,), torch.int32), T((3, 5), torch.int32)
    before = DRV.launches()
    oc2 = tessel.attention_with_kvcache(qc2, pages2, pages2, seqlens2, block_table=table2)
    again = DRV.last_launch()
    again_launches = DRV.launches() - before
    ints = lambda rec, a, b: [fakecuda.slot_i32(x) for x in rec["slots"][a:b]]   # noqa: E731
    return {"launched": launched, "shapes": [list(o.shape), list(oc.shape)],
            "varlen": {"grid": varlen["grid"], "slots": varlen["slots"][:4], "o": o.ptr,
                       "ints": ints(varlen, 7, 13)},
            "ptrs": [q.ptr, k.ptr],
            "paged": {"grid": paged["grid"], "ints": ints(paged, 7, 13)},
            "decode": {"launches": decode_launches, "grid": decode["grid"],
                       "slots": decode["slots"][:2], "ints": ints(decode, 7, 13)},
            "split": {"launches": split_launches, "combine_grid": combine["grid"]},
            "again": {"launches": again_launches, "grid": again["grid"],
                      "slots": again["slots"][:7], "ints": ints(again, 7, 13),
                      "new_plans": len(serving._PLANS) - plans,
                      "ptrs": [qc2.ptr, pages2.ptr, pages2.ptr, oc2.ptr, seqlens2.ptr,
                               table2.ptr], "first_o": oc.ptr},
            "qc": [qc.ptr, pages.ptr]}


@scenario
def kvcache_append_plans():
    # k=, v= and rotary keep plans (forty-seventh session): the same signature again with new
    # tensors replays the rotations, the append and the attention, on the new tensors.
    from tessel import kvcache_append, serving
    T.__add__ = lambda self, n: T(self.shape, self.dtype, self.device)   # cache_seqlens + Sk

    def call(rotary):
        q, kn, vn = T((3, 1, 8, 128), torch.float16), *(T((3, 1, 2, 128), torch.float16)
                                                          for _ in range(2))
        kc, vc = (T((3, 640, 2, 128), torch.float16) for _ in range(2))
        seqlens = T((3,), torch.int32)
        tables = {"rotary_cos": T((700, 32), torch.float16),
                  "rotary_sin": T((700, 32), torch.float16)} if rotary else {}
        DRV.record_params(6)
        before, plans = DRV.launches(), len(serving._PLANS)
        o = tessel.attention_with_kvcache(q, kc, vc, seqlens, causal=True, k=kn, v=vn, **tables)
        return {"launches": DRV.launches() - before, "new_plans": len(serving._PLANS) - plans,
                "slots": DRV.last_launch()["slots"],
                "ptrs": [x.ptr for x in (q, kc, vc, o, seqlens)]}
    return {name: [call(rotary), call(rotary)] for name, rotary in (("plain", False),
                                                                   ("rotary", True))}


@scenario
def gated_serving_calls():
    # cache_leftpad and attention_varlen(block_table=) on CUDA tensors: refused while their
    # GPU-check switches are off, then one launch each reading the given tensors.
    from tessel import serving_checks, varlen_cache
    serving_checks.LEFTPAD_CHECKED = varlen_cache.CUDA_CHECKED = False
    pack, varlen_cache.PACK_DECODE_ROWS_CUDA = varlen_cache.PACK_DECODE_ROWS_CUDA, False
    q, kc = T((3, 1, 8, 128), torch.float16), T((40, 16, 2, 128), torch.float16)
    seqlens, table, pad = T((3,), torch.int32), T((3, 5), torch.int32), T((3,), torch.int32)
    qv, cu = T((9, 8, 128), torch.float16), T((4,), torch.int32)
    calls = {
        "leftpad": lambda: tessel.attention_with_kvcache(q, kc, kc, seqlens, block_table=table,
                                                         num_splits=1, cache_leftpad=pad),
        "varlen_paged": lambda: tessel.attention_varlen(qv, kc, kc, cu, None, 7, 80,
                                                        block_table=table, seqused_k=seqlens),
    }
    out = {}
    for name, call in calls.items():
        try:
            call()
            out[name] = {"refused": None}
        except NotImplementedError as e:
            out[name] = {"refused": str(e)}
    serving_checks.LEFTPAD_CHECKED = varlen_cache.CUDA_CHECKED = True
    DRV.record_params(16)
    for name, call in calls.items():
        before = DRV.launches()
        call()
        last = DRV.last_launch()
        out[name].update(launches=DRV.launches() - before, grid=last["grid"],
                         slots=last["slots"])
    out["ptrs"] = {"q": q.ptr, "kc": kc.ptr, "seqlens": seqlens.ptr, "table": table.ptr,
                   "pad": pad.ptr, "qv": qv.ptr, "cu": cu.ptr}
    # The varlen call again with new tensors and a longer max_seqlen_k (a decode step later):
    # its plan, one launch on the new tensors (its decode steps not packed: the one launch).
    from tessel import varlen_cache as vc
    plans = len(vc._PLANS)
    qv2, kc2, cu2 = T((9, 8, 128), torch.float16), T((40, 16, 2, 128), torch.float16), \
        T((4,), torch.int32)
    used2, table2 = T((3,), torch.int32), T((3, 5), torch.int32)
    before = DRV.launches()
    tessel.attention_varlen(qv2, kc2, kc2, cu2, None, 7, 81, block_table=table2,
                            seqused_k=used2)
    out["again"] = {"launches": DRV.launches() - before, "new_plans": len(vc._PLANS) - plans,
                    "slots": DRV.last_launch()["slots"],
                    "ptrs": [qv2.ptr, kc2.ptr, cu2.ptr, used2.ptr, table2.ptr]}
    # The mixed batch with its decode steps by the split-KV program (PACK_DECODE_ROWS_CUDA):
    # the split program, its combine and varlen_cache_kernel; a plan of its own, then kept.
    vc.PACK_DECODE_ROWS_CUDA = True
    DRV.record_params(11)                 # the combine program has 11 parameters
    for name in ("packed", "packed_again"):
        plans, before = len(vc._PLANS), DRV.launches()
        tessel.attention_varlen(qv2, kc2, kc2, cu2, None, 7, 81, block_table=table2,
                                seqused_k=used2)
        out[name] = {"launches": DRV.launches() - before, "new_plans": len(vc._PLANS) - plans,
                     "slots": DRV.last_launch()["slots"]}
    vc.PACK_DECODE_ROWS_CUDA = pack
    return out


def main(names):
    results = {}
    for name in names or SCENARIOS:
        try:
            results[name] = SCENARIOS[name]()
        except Exception:  # noqa: BLE001
            results[name] = {"crashed": traceback.format_exc()}
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1:])
