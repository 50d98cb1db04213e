"""tesselc as a user meets it: bad input and bad options give a located error and exit 1."""
import pathlib
import subprocess

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def run(tools, args, stdin=""):
    return subprocess.run([str(tools / "tesselc"), *args], input=stdin, capture_output=True,
                          text=True, timeout=120)


def test_unsupported_op_is_located(tools, tmp_path):
    src = tmp_path / "bad.mlir"
    src.write_text("func.func private @helper(i32)\n"
                   "func.func @k(%n: i32) {\n"
                   "  func.call @helper(%n) : (i32) -> ()\n"
                   "  return\n}\n")
    r = run(tools, [str(src), "--emit=ptx", "-o", "-"])
    assert r.returncode == 1
    assert f"{src}:3:3: error: 'func.call' op is not supported by convert-tile-to-gpu" in r.stderr
    assert "Stack dump" not in r.stderr


def test_streamed_softmax_is_located(tools):
    src = ("func.func @k(%x: f32, %n: i32) {\n"
           "  %c0 = arith.constant 0 : i32\n"
           "  %c8 = arith.constant 8 : i32\n"
           "  %s = tile.splat %x : f32 -> tensor<4x8xf32>\n"
           "  scf.for %j = %c0 to %n step %c8 : i32 {\n"
           "    %p, %l = tile.softmax %s axis 1 streamed : tensor<4x8xf32> -> tensor<4xf32>\n"
           "  }\n"
           "  return\n}\n")
    r = run(tools, ["-", "--emit=ptx", "-o", "-", "--tile-optimize=false"], src)
    assert r.returncode == 1
    assert "<stdin>:6:14: error: 'tile.softmax' op is streamed: run tile-online-softmax" in r.stderr


def test_syntax_error_is_located(tools):
    r = run(tools, ["-", "--emit=ptx"], "func.func @k() {\n  %0 = tile.program_id : i32\n}\n")
    assert r.returncode == 1
    assert "<stdin>:2:" in r.stderr and "error:" in r.stderr


def test_bad_chip_is_rejected(tools):
    r = run(tools, [str(EXAMPLES / "softmax_rows.mlir"), "--chip=sm_70", "-o", "-"])
    assert r.returncode == 1
    assert "unknown chip 'sm_70' (expected sm_80 or sm_90a)" in r.stderr


def test_bad_emit_is_rejected(tools):
    r = run(tools, [str(EXAMPLES / "softmax_rows.mlir"), "--emit=sass", "-o", "-"])
    assert r.returncode == 1
    assert "sass" in r.stderr


def test_cubin_needs_output_file(tools):
    r = run(tools, [str(EXAMPLES / "softmax_rows.mlir"), "--emit=cubin"])
    assert r.returncode == 1
    assert "give an output file with -o" in r.stderr


def test_missing_input_file(tools, tmp_path):
    r = run(tools, [str(tmp_path / "none.mlir"), "-o", "-"])
    assert r.returncode == 1
    assert "none.mlir" in r.stderr


def test_emits_ptx_and_tile(tools):
    ptx = run(tools, [str(EXAMPLES / "softmax_rows.mlir"), "--chip=sm_80", "--emit=ptx", "-o", "-"])
    assert ptx.returncode == 0, ptx.stderr
    assert ".target sm_80" in ptx.stdout and ".entry softmax_rows(" in ptx.stdout
    tile = run(tools, [str(EXAMPLES / "softmax_rows.mlir"), "--emit=tile", "-o", "-"])
    assert tile.returncode == 0 and "tile.softmax" in tile.stdout


BIG_TILE = ("func.func @big(%x: f32) {\n"
            "  %t = tile.splat %x : f32 -> tensor<200x256xf32>\n"
            "  return\n}\n")


def test_errors_carry_no_ir_dump(tools):
    # 200x256 f32 = 204800 bytes: more than sm_80's 163 KiB of shared memory per CTA.
    r = run(tools, ["-", "--chip=sm_80", "--emit=ptx", "-o", "-", "--tile-optimize=false"], BIG_TILE)
    assert r.returncode == 1
    assert ("<stdin>:1:1: error: 'func.func' op needs 204800 bytes of shared memory for its tiles"
            in r.stderr)
    assert "more than the 166912 a CTA may use" in r.stderr
    assert "see current operation" not in r.stderr
    assert '"func.func"' not in r.stderr and "tile.splat" not in r.stderr.split("error:")[1]


def test_unsupported_op_error_carries_no_ir_dump(tools):
    src = ("func.func private @helper(i32)\n"
           "func.func @k(%n: i32) {\n"
           "  func.call @helper(%n) : (i32) -> ()\n"
           "  return\n}\n")
    r = run(tools, ["-", "--emit=ptx", "-o", "-", "--tile-optimize=false"], src)
    assert r.returncode == 1
    assert "'func.call' op is not supported by convert-tile-to-gpu" in r.stderr
    assert "see current operation" not in r.stderr


def test_report_gives_launch_needs(tools, tmp_path):
    # The same kernel fits sm_90a's 227 KiB: dynamic shared memory, reported for the launcher.
    r = run(tools, ["-", "--chip=sm_90a", "--emit=cubin", "--tile-optimize=false", "-o", str(tmp_path / "big.cubin"),
                    "--ptxas-report", "--num-threads=256"], BIG_TILE)
    assert r.returncode == 0, r.stderr
    assert "kernel big: block 256x1x1, 204800 bytes dynamic smem" in r.stdout
    assert "ptxas sm_90a big:" in r.stdout and " 0 bytes smem," in r.stdout


def test_naive_attention_compiles_as_written(tools, tmp_path):
    """tile-optimize runs first by default: the naive (streamed softmax) kernel compiles."""
    example = pathlib.Path(__file__).resolve().parents[2] / "examples" / "attention_naive.mlir"
    r = subprocess.run([str(tools / "tesselc"), str(example), "--chip=sm_80", "--emit=ptx", "-o", "-"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert ".entry attention(" in r.stdout and "ex2.approx" in r.stdout
    off = subprocess.run([str(tools / "tesselc"), str(example), "--emit=ptx", "-o", "-",
                          "--tile-optimize=false"], capture_output=True, text=True, timeout=120)
    assert off.returncode == 1 and "run tile-online-softmax" in off.stderr


def test_help_lists_every_option(tools):
    """Every cl::opt of tesselc.cpp appears in --help (HideUnrelatedOptions hides an option
    without cl::cat(tesselcCategory): --codegen and --wgmma-overlap were missing)."""
    import re
    source = (pathlib.Path(__file__).resolve().parents[2] / "tools" / "tesselc" /
              "tesselc.cpp").read_text()
    names = re.findall(r'cl::opt<[^>]*>\s*\w+\(\s*"([\w-]+)"', source)
    assert {"chip", "emit", "codegen", "wgmma-overlap"} <= set(names), names
    r = run(tools, ["--help"])
    assert r.returncode == 0
    for name in names:
        flag = f"-{name} " if len(name) == 1 else f"--{name}"
        assert flag in r.stdout, f"{flag} is not in tesselc --help"


def test_version_names_tessel_and_llvm(tools):
    import tomllib
    r = run(tools, ["--version"])
    assert r.returncode == 0
    pyproject = pathlib.Path(__file__).resolve().parents[2] / "pyproject.toml"
    version = tomllib.loads(pyproject.read_text())["project"]["version"]
    assert f"tesselc (tessel {version}) on LLVM/MLIR 22." in r.stdout, r.stdout
    import dsl_helpers  # noqa: F401
    from tessel.version import VERSION
    assert VERSION == version
