"""tessel-opt as a user meets it: bad input and bad options give a located error and exit 1."""
import subprocess


def run(tools, args, stdin):
    return subprocess.run([str(tools / "tessel-opt"), *args], input=stdin, capture_output=True,
                          text=True, timeout=60)


def test_invalid_ir_is_located(tools):
    src = "func.func @f(%a: tensor<4x8xf16>, %b: tensor<4x8xf16>, %c: tensor<4x8xf32>) {\n" \
          "  %d = tile.dot %a, %b, %c : tensor<4x8xf16>, tensor<4x8xf16> -> tensor<4x8xf32>\n" \
          "  return\n}\n"
    r = run(tools, ["-"], src)
    assert r.returncode == 1
    assert "<stdin>:2:8: error: 'tile.dot' op contraction sizes differ: a is 4x8, b is 4x8" in r.stderr
    assert "Stack dump" not in r.stderr


def test_syntax_error_is_located(tools):
    r = run(tools, ["-"], "func.func @f() {\n  %0 = tile.program_id : i32\n  return\n}\n")
    assert r.returncode == 1
    assert "<stdin>:2:" in r.stderr and "error:" in r.stderr


def test_unknown_option_is_rejected(tools):
    r = run(tools, ["--no-such-option", "-"], "")
    assert r.returncode == 1
    assert "Unknown command line argument '--no-such-option'" in r.stderr


def test_unknown_pass_is_rejected(tools):
    r = run(tools, ["--pass-pipeline=builtin.module(tile-no-such-pass)", "-"], "")
    assert r.returncode == 1
    assert "tile-no-such-pass" in r.stderr and "Stack dump" not in r.stderr


def test_empty_input_round_trips(tools):
    r = run(tools, ["-"], "")
    assert r.returncode == 0
    assert "module" in r.stdout


def test_tools_are_self_contained(tools):
    """The tools travel to the GPU machine, which has no LLVM: no libLLVM/libMLIR dependency."""
    for tool in ("tessel-opt", "tesselc", "tessel-run"):
        r = subprocess.run(["ldd", str(tools / tool)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        libs = r.stdout.lower()
        assert "libllvm" not in libs and "libmlir" not in libs, f"{tool}: {r.stdout}"
        assert "libstdc++" in libs  # ldd really listed the dependencies


def _nested(depth):
    """A function whose body nests `depth` scf.if regions."""
    return ("func.func @f(%c: i1) {\n" + "scf.if %c {\n" * depth + "}\n" * depth +
            "  return\n}\n")


def test_deep_nesting_is_refused_by_every_tool(tools, tmp_path):
    # Issue 15, finding 7: ~5,000 nested regions overflowed the stack inside MLIR's parser in all
    # three tools (SIGSEGV). The input is now checked first: a located error past 256 levels.
    path = tmp_path / "deep.mlir"
    path.write_text(_nested(5000))
    for tool, args in (("tessel-opt", [str(path)]), ("tesselc", [str(path), "--emit=tile"]),
                       ("tessel-run", [str(path), "--kernel=f", "--arg=i1:1"])):
        r = subprocess.run([str(tools / tool), *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 1, (tool, r.returncode, r.stderr[-500:])
        assert f"{path}:257:11: error: nesting deeper than 256 levels" in r.stderr, (tool, r.stderr)
    # Through stdin too, and nesting within the limit still parses.
    r = run(tools, ["-"], _nested(5000))
    assert r.returncode == 1 and "<stdin>:257:11: error: nesting deeper than 256" in r.stderr
    ok = run(tools, ["-"], _nested(100))
    assert ok.returncode == 0 and ok.stdout.count("scf.if") == 100, ok.stderr
