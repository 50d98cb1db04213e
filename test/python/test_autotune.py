"""tessel.autotune without a GPU: the choice per tuning key, the skipped configs, the grid's meta
dict, and the timing path with stand-ins for the chip, the launcher and the CUDA events (the
compiles behind them are real)."""
import json
import os
import pathlib
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

import tessel
from tessel import _tessel
from tessel import cache
from tessel import language as tl
from dsl_helpers import BUILD

tuning = sys.modules["tessel.autotune"]      # tessel.autotune is the decorator
HERE = pathlib.Path(__file__).resolve().parent


@tessel.jit
def scale_kernel(x, y, n, alpha, BLOCK: tl.constexpr, SQUARE: tl.constexpr):
    start = tl.program_id(0) * BLOCK
    xd = tl.make_desc(x, shape=(n,), strides=(1,))
    yd = tl.make_desc(y, shape=(n,), strides=(1,))
    t = tl.load(xd, (start,), shape=(BLOCK,))
    if SQUARE:
        t = tl.dot(t, t)             # a 1-D tile: this config does not compile
    tl.store(yd, (start,), (t * alpha).to(y.dtype))


BAD = tessel.Config({"BLOCK": 32, "SQUARE": True})
SMALL = tessel.Config({"BLOCK": 16, "SQUARE": False}, num_warps=2)
LARGE = tessel.Config({"BLOCK": 64, "SQUARE": False}, num_stages=3)


def tuned(configs=(BAD, SMALL, LARGE), **kwargs):
    return tessel.autotune(configs=list(configs), key=["n"], **kwargs)(scale_kernel)


def count_choices(tuner, monkeypatch):
    calls = []
    choose = tuner._choose

    def counted(*args):
        calls.append(args[0])
        return choose(*args)
    monkeypatch.setattr(tuner, "_choose", counted)
    return calls


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSEL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TESSEL_AUTOTUNE_VERBOSE", raising=False)
    cache.forget_memory()
    yield tmp_path / "cache"
    cache.forget_memory()


def grid_of(meta):
    return (-(-meta["n"] // meta["BLOCK"]),)


# --- the interpreter ----------------------------------------------------------------------------

def test_the_interpreter_takes_the_first_config_that_compiles_once_per_key(monkeypatch):
    kern = tuned()
    choices = count_choices(kern, monkeypatch)
    x = np.arange(100, dtype=np.float32)
    y = np.zeros_like(x)
    kern[grid_of](x, y, 100, 2.0)
    np.testing.assert_array_equal(y, 2 * x)
    assert kern.best_config == SMALL
    kern[grid_of](x, y, 100, 3.0)                          # same key: no new choice
    assert len(choices) == 1
    kern[grid_of](x[:50], y[:50], 50, 1.0)                 # another n
    kern[grid_of](x.astype(np.float16), y.astype(np.float16), 50, 1.0)   # another dtype
    assert len(choices) == 3 and len(kern.cache) == 3
    assert set(kern.cache.values()) == {1}


def test_the_grid_callable_gets_the_arguments_and_the_configs_values():
    seen = []

    def grid(meta):
        seen.append(dict(meta))
        return grid_of(meta)
    kern = tuned(configs=[LARGE])
    x = np.ones(70, np.float32)
    kern[grid](x, np.zeros_like(x), 70, alpha=0.5)
    assert seen[-1]["BLOCK"] == 64 and seen[-1]["SQUARE"] is False
    assert seen[-1]["n"] == 70 and seen[-1]["alpha"] == 0.5 and seen[-1]["x"] is x


def test_no_config_that_compiles_is_an_error_naming_each_reason():
    kern = tuned(configs=[BAD, tessel.Config({"BLOCK": 8, "SQUARE": True})])
    x = np.ones(8, np.float32)
    with pytest.raises(tessel.CompilationError) as e:
        kern[grid_of](x, x.copy(), 8, 1.0)
    message = str(e.value)
    assert "no config of scale_kernel works for n=8 [f32,f32] on interpreter" in message
    assert "Config(BLOCK=32, SQUARE=True): " in message and "Config(BLOCK=8, SQUARE=True): " \
        in message and "tl.dot's first operand" in message


def test_bad_uses_are_refused():
    with pytest.raises(TypeError, match="decorates a @tessel.jit kernel"):
        tessel.autotune(configs=[SMALL], key=["n"])(scale_kernel.fn)
    with pytest.raises(ValueError, match="non-empty list of tessel.Config"):
        tessel.autotune(configs=[], key=["n"])(scale_kernel)
    with pytest.raises(ValueError, match=r"key=\.\.\.\): scale_kernel has no parameter 'N'"):
        tessel.autotune(configs=[SMALL], key=["N"])(scale_kernel)
    with pytest.raises(ValueError, match="'alpha' is not a tl.constexpr parameter"):
        tessel.autotune(configs=[tessel.Config({"alpha": 1.0})], key=["n"])(scale_kernel)
    with pytest.raises(ValueError, match="'BLOCK' is a constexpr, not an output"):
        tessel.autotune(configs=[SMALL], key=["n"], reset_to_zero=["BLOCK"])(scale_kernel)
    with pytest.raises(ValueError, match="num_warps must be 1, 2, 4, 8, 16 or 32"):
        tessel.Config({"BLOCK": 16}, num_warps=3)
    with pytest.raises(ValueError, match="num_stages must be 2, 3 or 4"):
        tessel.Config({"BLOCK": 16}, num_stages=1)
    with pytest.raises(TypeError, match="Config's keys are parameter names"):
        tessel.Config({1: 16})
    x = np.ones(8, np.float32)
    with pytest.raises(ValueError, match="BLOCK is set by the autotuner's configs"):
        tuned()[grid_of](x, x.copy(), 8, 1.0, BLOCK=8)
    with pytest.raises(RuntimeError, match=r"launch it with scale_kernel\[grid\]"):
        tuned()(x, x, 8, 1.0)


def test_a_configs_options_replace_the_kernels_only_where_set():
    base = scale_kernel.with_options(num_warps=8, num_stages=4)
    kern = tessel.autotune(configs=[SMALL, LARGE], key=["n"])(base)
    assert [v.options.num_warps for v in kern._variants] == [2, 8]
    assert [v.options.num_stages for v in kern._variants] == [4, 3]


def test_verbose_prints_the_choice(capsys, monkeypatch):
    x = np.ones(8, np.float32)
    tuned(verbose=True)[grid_of](x, x.copy(), 8, 1.0)
    assert "tessel autotune: scale_kernel n=8 [f32,f32] on interpreter: Config(BLOCK=16, " \
           "SQUARE=False, num_warps=2) (the first that compiles" in capsys.readouterr().err
    tuned()[grid_of](x, x.copy(), 8, 1.0)
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("TESSEL_AUTOTUNE_VERBOSE", "1")
    tuned()[grid_of](x, x.copy(), 8, 1.0)
    assert "tessel autotune: scale_kernel" in capsys.readouterr().err


# --- the GPU path, with stand-ins ---------------------------------------------------------------

class Buffer(tessel.DevicePointer):
    """Device memory that counts how often the autotuner zeroes it."""

    def __init__(self, *args):
        super().__init__(*args)
        self.zeroed = 0

    def zero_(self):
        self.zeroed += 1


class FakeLauncher:
    def __init__(self, binary):
        self.binary = binary
        self.launches = []

    def launch(self, grid, stream, *args):
        self.launches.append(grid)

    def __call__(self, grid, stream, *args):
        self.launch(grid, stream, *args)


@pytest.fixture
def fake_gpu(cache_dir, monkeypatch):
    """chip_of, the launchers (one per binary, as tessel.gpu keeps them) and the device name
    stood in for; returns {binary key: FakeLauncher}."""
    made = {}
    monkeypatch.setattr(tessel.gpu, "chip_of", lambda device: "sm_80")
    monkeypatch.setattr(tessel.gpu, "launcher", lambda binary, params: made.setdefault(
        binary.key, FakeLauncher(binary)))
    monkeypatch.setattr(tuning, "device_name", lambda device: "Fake GPU")
    return made


def fake_timer(times, log):
    """A cuda_time that zeroes once, launches once, and reports the next of `times` for a config
    it has not timed yet, the same again for one it has (the tuner times every config twice,
    the second round in reverse order)."""
    seen = {}

    def cuda_time(call, reset, warmup_calls, timed_calls, device):
        reset()
        call()
        if call not in seen:
            log.append(device)
            seen[call] = times.pop(0)
        return seen[call]
    return cuda_time


def gpu_args(n=100):
    return Buffer(1 << 20, "f32"), Buffer(2 << 20, "f32"), n, 1.0


def records(cache_dir):
    directory = str(cache_dir) + "-autotune"
    return [json.load(open(os.path.join(directory, f))) for f in sorted(os.listdir(directory))]


def test_the_gpu_path_times_each_config_and_keeps_the_fastest(fake_gpu, cache_dir, monkeypatch):
    log = []
    monkeypatch.setattr(tuning, "cuda_time", fake_timer([3.0, 1.0], log))
    kern = tuned(reset_to_zero=["y"])
    x, y, n, alpha = gpu_args()
    kern[grid_of](x, y, n, alpha)
    assert kern.best_config == LARGE and log == [0, 0]    # BAD never reached the timer
    # Each config compiled with its options; the chosen one launched once more after timing.
    blocks = sorted(launcher.binary.block for launcher in fake_gpu.values())
    assert blocks == [(64, 1, 1), (128, 1, 1)]
    chosen = next(launcher for launcher in fake_gpu.values()
                  if launcher.binary.block == (128, 1, 1))
    # Timed in two rounds (the fake timer launches once a round), then the real launch.
    assert chosen.launches == [(2,), (2,), (2,)]
    # y zeroed before each timed call (the fake timer's one each) and before the real launch.
    assert y.zeroed == 5 and x.zeroed == 0
    # The record on disk, beside the kernel cache and not in it.
    assert os.listdir(cache_dir) and all(len(name) == 64 for name in os.listdir(cache_dir))
    (record,) = records(cache_dir)
    assert record["chosen"] == 2 and record["config"] == LARGE.record()
    assert record["timings_ms"] == [None, 3.0, 1.0] and set(record["skipped"]) == {"0"}
    assert record["key"] == {"n": 100} and record["device"] == "Fake GPU"
    assert record["signature"][0] == ["x", "ptr", "f32"] and record["format"] == 1
    # The same key again: no timing.
    kern[grid_of](x, y, n, alpha)
    assert len(log) == 2 and chosen.launches == [(2,), (2,), (2,), (2,)]


def test_a_second_tuner_reads_the_choice_from_disk(fake_gpu, cache_dir, monkeypatch):
    monkeypatch.setattr(tuning, "cuda_time", fake_timer([1.0, 3.0], []))
    tuned()[grid_of](*gpu_args())
    assert records(cache_dir)[0]["chosen"] == 1

    def no_timing(*args):
        raise AssertionError("timed again")
    monkeypatch.setattr(tuning, "cuda_time", no_timing)
    again = tuned()                                        # a new instance: empty memory
    again[grid_of](*gpu_args())
    assert again.best_config == SMALL
    # Other configs, another kernel source, another device or another key: tuned again.
    for kern, args in ((tuned(configs=(SMALL, LARGE, BAD)), gpu_args()),
                       (tuned(), gpu_args(n=50))):
        monkeypatch.setattr(tuning, "cuda_time", fake_timer([2.0, 1.0], []))
        kern[grid_of](*args)
        assert kern.best_config == LARGE
    monkeypatch.setattr(tuning, "device_name", lambda device: "Another GPU")
    monkeypatch.setattr(tuning, "cuda_time", fake_timer([2.0, 1.0], []))
    tuned()[grid_of](*gpu_args())
    assert len(records(cache_dir)) == 4


# Another process with the same stand-ins, whose timer must not be called.
READER = textwrap.dedent("""
    import dsl_helpers
    import test_autotune as t
    import tessel
    tessel.gpu.chip_of = lambda device: "sm_80"
    tessel.gpu.launcher = lambda binary, params: t.FakeLauncher(binary)
    t.tuning.device_name = lambda device: "Fake GPU"

    def no_timing(*args):
        raise SystemExit("timed again")
    t.tuning.cuda_time = no_timing
    kern = t.tuned()
    kern[t.grid_of](*t.gpu_args())
    print(kern.best_config)
""")


def test_another_process_reads_the_choice_from_disk(fake_gpu, cache_dir, monkeypatch):
    monkeypatch.setattr(tuning, "cuda_time", fake_timer([4.0, 2.0], []))
    tuned()[grid_of](*gpu_args())
    env = dict(os.environ, TESSEL_CACHE_DIR=str(cache_dir), TESSEL_BUILD_DIR=str(BUILD.resolve()))
    r = subprocess.run([sys.executable, "-c", READER], cwd=HERE, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == repr(LARGE)


def test_a_damaged_record_is_tuned_again(fake_gpu, cache_dir, monkeypatch):
    monkeypatch.setattr(tuning, "cuda_time", fake_timer([1.0, 3.0], []))
    tuned()[grid_of](*gpu_args())
    directory = str(cache_dir) + "-autotune"
    (name,) = os.listdir(directory)
    for damage in ("{not json", json.dumps(dict(records(cache_dir)[0], chosen=7)),
                   json.dumps(dict(records(cache_dir)[0], config=LARGE.record()))):
        with open(os.path.join(directory, name), "w") as f:
            f.write(damage)
        monkeypatch.setattr(tuning, "cuda_time", fake_timer([5.0, 4.0], []))
        kern = tuned()
        kern[grid_of](*gpu_args())
        assert kern.best_config == LARGE
        assert records(cache_dir)[0]["chosen"] == 2


def test_a_launch_the_driver_refuses_skips_the_config(fake_gpu, cache_dir, monkeypatch, capsys):
    def refusing(call, reset, warmup_calls, timed_calls, device):
        if not refusing.calls:
            refusing.calls.append(1)
            raise _tessel.CudaError("cuLaunchKernel failed: too many resources requested")
        return 1.0
    refusing.calls = []
    monkeypatch.setattr(tuning, "cuda_time", refusing)
    kern = tuned(verbose=True)
    kern[grid_of](*gpu_args())
    assert kern.best_config == LARGE
    err = capsys.readouterr().err
    assert "Config(BLOCK=16, SQUARE=False, num_warps=2): skipped: cuLaunchKernel failed" in err
    assert "Config(BLOCK=32, SQUARE=True): skipped: " in err
    assert "Config(BLOCK=64, SQUARE=False, num_stages=3) (1.0000 ms, the fastest of 1)" in err
    assert set(records(cache_dir)[0]["skipped"]) == {"0", "1"}


def test_an_unwritable_directory_keeps_the_choice_in_memory(fake_gpu, cache_dir, monkeypatch,
                                                           caplog):
    (cache_dir.parent / "cache-autotune").write_text("a file where the directory would be")
    monkeypatch.setattr(tuning, "cuda_time", fake_timer([1.0, 3.0], []))
    kern = tuned()
    kern[grid_of](*gpu_args())
    assert kern.best_config == SMALL
    assert "cannot write autotuning choices" in caplog.text


def test_reset_to_zero_needs_a_tensor(fake_gpu, monkeypatch):
    monkeypatch.setattr(tuning, "cuda_time", fake_timer([1.0, 3.0], []))
    x = tessel.DevicePointer(1 << 20, "f32")
    with pytest.raises(TypeError, match="reset_to_zero: argument 'y' .* cannot be zeroed"):
        tuned(reset_to_zero=["y"])[grid_of](x, tessel.DevicePointer(2 << 20, "f32"), 8, 1.0)


# --- cuda_time, with stand-in events ------------------------------------------------------------

class FakeEvents:
    """torch.cuda's device, Event and synchronize, recording the order of what happens."""

    def __init__(self, spans):
        self.spans = list(spans)
        self.log = []
        events = self

        class Event:
            def __init__(self, enable_timing=False):
                assert enable_timing
                self.span = None

            def record(self):
                events.log.append("record")
                self.span = events.spans[0] if events.log.count("record") % 2 == 0 else None
                if self.span is not None:
                    events.spans.pop(0)

            def elapsed_time(self, end):
                return end.span

        class Device:
            def __init__(self, device):
                events.log.append(f"device {device}")

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False
        class Buffer:
            def __init__(self, size):
                events.flush_bytes = size

            def zero_(self):
                events.log.append("flush")

        def empty(size, dtype, device):
            assert dtype == "int8" and device.startswith("cuda:")
            return Buffer(size)

        self.int8 = "int8"
        self.empty = empty
        self.cuda = types.SimpleNamespace(
            Event=Event, device=Device, synchronize=lambda: self.log.append("sync"),
            get_device_properties=lambda d: types.SimpleNamespace(L2_cache_size=50 << 20))


def test_cuda_time_is_the_median_of_the_timed_calls_after_the_warmups(monkeypatch):
    events = FakeEvents([5.0, 1.0, 3.0])
    monkeypatch.setattr(tessel.gpu, "torch_module", lambda: events)
    ms = tuning.cuda_time(lambda: events.log.append("call"), lambda: events.log.append("reset"),
                          2, 3, 1)
    assert ms == 3.0
    # The L2 is flushed (twice its size zeroed) before each timed call, outside the span.
    assert events.log == ["device 1"] + ["reset", "call"] * 2 + \
        ["reset", "flush", "record", "call", "record"] * 3 + ["sync"]
    assert events.flush_bytes == 100 << 20
    monkeypatch.setattr(tessel.gpu, "torch_module", lambda: None)
    with pytest.raises(RuntimeError, match="import torch"):
        tuning.cuda_time(lambda: None, lambda: None, 1, 1, 0)
