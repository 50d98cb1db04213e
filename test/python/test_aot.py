"""Ahead-of-time kernels: `python -m tessel aot` writes cubins, PTX, a C header and source and a
manifest; the header and source compile as C11 and C++17 with -Wall -Wextra -Werror and link
against libcuda alone (the driver stub here); examples/aot builds, and runs where a GPU is."""
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from dsl_helpers import BUILD

ROOT = pathlib.Path(__file__).resolve().parents[2]
DSL = ROOT / "examples" / "aot" / "attention_dsl.py"
CUDA = pathlib.Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
STUBS = CUDA / "lib64" / "stubs"
SPECS = ["dtype=f16,head_dim=64,causal=1,chip=sm_90a",
         "dtype=bf16,head_dim=32,mask=prefix_lm,chip=sm_80"]
FUNCTIONS = ["tessel_attention_f16_d64_causal_sm90a", "tessel_attention_bf16_d32_prefix_lm_sm80"]


def env(cache_dir):
    return dict(os.environ, PYTHONPATH=str(BUILD.resolve() / "python"),
                TESSEL_CACHE_DIR=str(cache_dir))


def tessel_aot(args, cache_dir):
    return subprocess.run([sys.executable, "-m", "tessel", "aot", *args], capture_output=True,
                          text=True, env=env(cache_dir), timeout=300)


@pytest.fixture(scope="module")
def aot_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("aot-cache")


@pytest.fixture(scope="module")
def generated(tmp_path_factory, aot_cache):
    out = tmp_path_factory.mktemp("aot")
    args = [str(DSL), "-o", str(out)]
    for s in SPECS:
        args += ["--spec", s]
    r = tessel_aot(args, aot_cache)
    assert r.returncode == 0, r.stderr
    # A line of progress on stderr before each compile.
    progress = [line for line in r.stderr.splitlines() if line.startswith("[")]
    assert progress == [f"[{i}/{len(FUNCTIONS)}] compiling {f} ({chip})" for i, (f, chip)
                        in enumerate(zip(FUNCTIONS, ("sm_90a", "sm_80")), 1)], r.stderr
    return out


def have_gpu():
    return any(pathlib.Path("/dev").glob("nvidia[0-9]*"))


def compilers():
    if not shutil.which("gcc") or not shutil.which("g++") or not (CUDA / "include/cuda.h").exists():
        pytest.skip("needs gcc, g++ and the CUDA headers")


def test_outputs_and_manifest(generated):
    m = json.loads((generated / "tessel_attention.json").read_text())
    assert [k["function"] for k in m["kernels"]] == FUNCTIONS
    k0, k1 = m["kernels"]
    assert (k0["dtype"], k0["head_dim"], k0["causal"], k0["mask"], k0["chip"]) == \
        ("f16", 64, True, "none", "sm_90a")
    assert (k1["dtype"], k1["head_dim"], k1["causal"], k1["mask"], k1["chip"]) == \
        ("bf16", 32, False, "prefix_lm", "sm_80")
    for k in m["kernels"]:
        cubin = (generated / k["cubin"]).read_bytes()
        assert cubin[:4] == b"\x7fELF" and hashlib.sha256(cubin).hexdigest() == k["cubin_sha256"]
        ptx = (generated / k["ptx"]).read_text()
        assert f".target {k['chip']}" in ptx and ".entry attention_kernel(" in ptx
        assert k["entry"] == "attention_kernel" and k["block"] == [128, 1, 1]
        assert len(k["cache_key"]) == 64
    header = (generated / "tessel_attention.h").read_text()
    for f in FUNCTIONS:
        assert (f"int {f}(CUstream stream, const void *q, const void *k, const void *v, void *o, "
                "void *lse, int32_t batch, int32_t heads, int32_t heads_kv, int32_t nq, "
                "int32_t nk, float scale);") in header
    source = (generated / "tessel_attention.c").read_text()
    # The cubin is embedded byte for byte.
    first = (generated / k0["cubin"]).read_bytes()[:8]
    assert ", ".join(f"0x{b:02x}" for b in first) in source
    assert "cuModuleLoadData" in source and "abort" not in source and "exit(" not in source


def test_a_second_run_hits_the_cache_and_writes_the_same_files(generated, aot_cache, tmp_path):
    args = [str(DSL), "-o", str(tmp_path)]
    for s in SPECS:
        args += ["--spec", s]
    r = tessel_aot(args + ["--spec", SPECS[0]], aot_cache)       # a duplicate spec is one kernel
    assert r.returncode == 0, r.stderr
    for name in ("tessel_attention.h", "tessel_attention.c"):
        assert (tmp_path / name).read_text() == (generated / name).read_text()


@pytest.mark.parametrize("lang", ["c", "c++"])
def test_generated_code_compiles_and_links(generated, tmp_path, lang):
    compilers()
    # A caller: includes the header, calls every function and the unload function.
    caller = tmp_path / ("caller.c" if lang == "c" else "caller.cpp")
    calls = "\n".join(f"  r |= {f}(0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0.0f);" for f in FUNCTIONS)
    caller.write_text(f'#include "tessel_attention.h"\nint main(void) {{\n  int r = 0;\n{calls}\n'
                      "  r |= tessel_attention_unload();\n  return r;\n}\n")
    cc, std = ("gcc", "-std=c11") if lang == "c" else ("g++", "-std=c++17")
    flags = [std, "-Wall", "-Wextra", "-Werror", "-I", str(generated), "-I", str(CUDA / "include")]
    lib = tmp_path / "lib.o"
    src = [str(generated / "tessel_attention.c")] if lang == "c" else \
        ["-x", "c++", str(generated / "tessel_attention.c"), "-x", "none"]
    r = subprocess.run([cc, *flags, "-c", *src, "-o", str(lib)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    exe = tmp_path / "caller"
    r = subprocess.run([cc, *flags, str(caller), str(lib), "-L", str(STUBS), "-lcuda",
                        "-lpthread", "-o", str(exe)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # Only libcuda (and the C/C++ runtime) is needed.
    needed = subprocess.run(["readelf", "-d", str(exe)], capture_output=True, text=True).stdout
    libs = {l.split("[")[1].split("]")[0] for l in needed.splitlines() if "(NEEDED)" in l}
    assert "libcuda.so.1" in libs
    assert not {l for l in libs if "cudart" in l or "tessel" in l or "nvrtc" in l}


def test_bad_specs_are_refused(tmp_path, aot_cache):
    for spec, message in [("dtype=f64", "dtype must be one of"),
                          ("chip=sm_70", "chip must be one of"),
                          ("head_dim=x", "head_dim must be a positive integer"),
                          ("colour=red", "unknown key 'colour'"),
                          ("mask=nonexistent", "has no mask_mod 'nonexistent'")]:
        r = tessel_aot([str(DSL), "-o", str(tmp_path), "--spec", spec], aot_cache)
        assert r.returncode == 2 and message in r.stderr, (spec, r.stderr)


def test_example_builds_and_runs_where_a_gpu_is(tmp_path, aot_cache):
    compilers()
    r = subprocess.run(["bash", str(ROOT / "examples/aot/build.sh"), str(tmp_path)],
                       capture_output=True, text=True, env=env(aot_cache), timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    exe = tmp_path / "attention_aot"
    assert exe.exists()
    if not have_gpu():
        pytest.skip("built examples/aot; running it needs a GPU")
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "PASS" in run.stdout, run.stdout + run.stderr


def test_unnamed_blocks_are_the_chips_choice():
    from tessel import aot
    s = aot.parse_spec("dtype=f16,head_dim=128,chip=sm_90a")
    assert (s.block_m, s.block_n) == (64, 64)                  # wgmma, one warpgroup
    assert s.function_name("t") == "t_f16_d128_sm90a"
    s = aot.parse_spec("dtype=bf16,head_dim=64,causal=1,chip=sm_90a")
    assert (s.block_m, s.block_n) == (64, 128)
    s = aot.parse_spec("dtype=f16,head_dim=128,chip=sm_80")
    assert (s.block_m, s.block_n) == (128, 64)                 # mma.sync, 4 warps x 32 rows
    s = aot.parse_spec("dtype=bf16,head_dim=32,chip=sm_80")
    assert (s.block_m, s.block_n) == (16, 16)                  # the reference lowering
    s = aot.parse_spec("dtype=f16,head_dim=64,chip=sm_90a,block_m=16,block_n=16")
    assert s.function_name("t") == "t_f16_d64_b16x16_sm90a"    # named blocks show in the name


# --- failures leave nothing half-written and say what is wrong (issue 15, finding 9) ----------

def _tree(d):
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(pathlib.Path(d).rglob("*"))
            if p.is_file()}


def test_a_failed_run_leaves_the_output_as_it_was(generated, aot_cache, tmp_path):
    # A refusal after the specs parse used to leave OUT/kernels/ half-written, and a failed rerun
    # an old header beside new cubins; now everything is staged and moved in at the end.
    out = tmp_path / "out"
    shutil.copytree(generated, out)
    before = _tree(out)
    too_big = "dtype=f32,head_dim=256,block_m=128,block_n=128,chip=sm_80"
    r = tessel_aot([str(DSL), "-o", str(out), "--spec", "dtype=f16,head_dim=32,chip=sm_80",
                    "--spec", too_big], aot_cache)
    assert r.returncode == 1 and "bytes of shared memory" in r.stderr
    # The refusal is one message, not ~130 lines of IR (beside a progress line a compile).
    said = [line for line in r.stderr.splitlines() if not line.startswith("[")]
    assert "see current operation" not in r.stderr and len(said) <= 3, r.stderr
    assert _tree(out) == before
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in generated.iterdir())


def test_mistakes_are_messages_not_tracebacks(tmp_path, aot_cache):
    broken = tmp_path / "broken.py"
    broken.write_text("import tessel\n\ndef oops(:\n    pass\n")
    raising = tmp_path / "raising.py"
    raising.write_text("import no_such_module_for_tessel\n")
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    spec = ["--spec", "dtype=f16,head_dim=32,chip=sm_80"]
    cases = [
        ([str(DSL), "-o", str(tmp_path / "o1"), "--name", "n" * 300, *spec], "at most 64"),
        ([str(DSL), "-o", str(tmp_path / "o2"), "--name", "cuda", *spec], "shadows a system or "
         "CUDA header"),
        ([str(DSL), "-o", str(a_file), *spec], "not a directory"),
        ([str(DSL), "-o", "/sys/tessel-aot-out", *spec], "cannot create the directory"),
        ([str(broken), "-o", str(tmp_path / "o3"), *spec], f"cannot import {broken}"),
        ([str(raising), "-o", str(tmp_path / "o4"), *spec], "ModuleNotFoundError"),
        ([str(DSL), "-o", str(tmp_path / "o5"), "--kernel", "prefix_lm", *spec],
         "'prefix_lm' of"),
        ([str(DSL), "-o", str(tmp_path / "o6"), "--spec", "head_dim=32,head_dim=64"],
         "head_dim is given twice"),
    ]
    for args, message in cases:
        r = tessel_aot(args, aot_cache)
        assert r.returncode == 2 and message in r.stderr, (args[-3:], r.returncode, r.stderr)
        assert "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "o2").exists() or not (tmp_path / "o2" / "cuda.h").exists()
