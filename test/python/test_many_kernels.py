"""A module of many kernels compiles each kernel as an LLVM module of its own (issue 15,
finding 8: one LLVM module of N kernels that share the dynamic shared-memory global took
O(N^2) in LLVM's GVN; docs/dev/cold-compile.md, "Many kernels in one module", has the
figures). What is checked here is the mechanism, not a time: the PTX of a module of several
kernels has one header and every kernel's `.entry` exactly as compiling that kernel alone gives
it. Compiled in one LLVM module, the second kernel's basic-block labels are numbered after the
first's ($L__BB1_…), so the comparison fails on the old behaviour."""
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from gen_many_kernels import many_kernels  # noqa: E402
from dsl_helpers import HAS_PTXAS  # noqa: E402

EXAMPLES = ROOT / "examples"


def tesselc(tools, src, *args):
    r = subprocess.run([str(tools / "tesselc"), str(src), *args], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return r


def entries(ptx):
    """{kernel: its `.entry` text, from the directive to the closing brace}."""
    found = {}
    for m in re.finditer(r"^\.visible \.entry (\w+)\(.*?^\}$", ptx, re.M | re.S):
        found[m.group(1)] = m.group(0)
    return found


def module_of(tmp_path, name, text):
    path = tmp_path / f"{name}.mlir"
    path.write_text(text)
    return path


@pytest.mark.parametrize("chip", ["sm_80", "sm_90a"])
def test_each_kernel_as_if_alone(tools, tmp_path, chip):
    # Three copies of the streamed attention kernel (the mma/wgmma lowering: they share the
    # `.extern .shared` arena) and the reference lowering's matmul and row softmax.
    programs = {
        "attention": many_kernels((EXAMPLES / "attention_streamed.mlir").read_text(), 3),
        "matmul": (EXAMPLES / "matmul.mlir").read_text(),
        "softmax": (EXAMPLES / "softmax_rows.mlir").read_text(),
    }
    together = module_of(tmp_path, "together", "\n".join(programs.values()))
    ptx = tesselc(tools, together, f"--chip={chip}", "--emit=ptx", "-o", "-").stdout
    assert ptx.count(".version") == 1 and ptx.count(".target") == 1
    assert ptx.count(".extern .shared") == 1
    got = entries(ptx)
    assert sorted(got) == ["attention_0", "attention_1", "attention_2", "matmul", "softmax_rows"]

    # Each alone: a module of one kernel is never split, so this is the whole-module path.
    alone = {}
    for name in ("matmul", "softmax"):
        src = module_of(tmp_path, name, programs[name])
        alone.update(entries(tesselc(tools, src, f"--chip={chip}", "-o", "-").stdout))
    for i in range(3):
        text = (EXAMPLES / "attention_streamed.mlir").read_text().replace(
            "@attention(", f"@attention_{i}(")
        alone.update(entries(tesselc(tools, module_of(tmp_path, f"attention_{i}", text),
                                     f"--chip={chip}", "-o", "-").stdout))
    assert sorted(alone) == sorted(got)
    for name, text in got.items():
        assert text == alone[name], f"{name} differs from its PTX compiled alone"


@pytest.mark.skipif(not HAS_PTXAS, reason="needs ptxas (the CUDA toolkit) to make cubins")
def test_one_cubin_holds_every_kernel(tools, tmp_path):
    src = module_of(tmp_path, "many", many_kernels(
        (EXAMPLES / "attention_streamed.mlir").read_text(), 4) +
        (EXAMPLES / "softmax_rows.mlir").read_text())
    r = tesselc(tools, src, "--chip=sm_90a", "--emit=cubin", "-o", str(tmp_path / "many.cubin"),
                "--ptxas-report")
    compiled = sorted(re.findall(r"^ptxas sm_90a (\w+):", r.stdout, re.M))
    assert compiled == ["attention_0", "attention_1", "attention_2", "attention_3",
                        "softmax_rows"]
    launched = sorted(re.findall(r"^kernel (\w+):", r.stdout, re.M))
    assert launched == compiled
