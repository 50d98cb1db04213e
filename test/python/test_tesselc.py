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
    r = run(tools, ["-", "--emit=ptx", "-o", "-"], src)
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
