#!/usr/bin/env python3
"""Writes a tile module holding N renamed copies of every function of one input module, for
measuring how compile time grows with the number of kernels in a module (issue 15, finding 8;
docs/dev/cold-compile.md, "Many kernels in one module").

    python3 scripts/gen_many_kernels.py N [INPUT.mlir] > many.mlir

INPUT defaults to examples/matmul.mlir. Copy i renames every `@name` defined in INPUT to
`@name_i` (definitions and references alike), so the copies are independent kernels.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def many_kernels(text, n):
    names = re.findall(r"func\.func\s+(?:private\s+)?@([A-Za-z_][\w$.]*)", text)
    if not names:
        raise SystemExit("gen_many_kernels: no func.func in the input")
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
    pattern = re.compile(r"@(" + "|".join(map(re.escape, names)) + r")\b")
    copies = [pattern.sub(lambda m, i=i: f"@{m.group(1)}_{i}", body) for i in range(n)]
    return "\n".join(copies) + "\n"


def main():
    if len(sys.argv) not in (2, 3) or not sys.argv[1].isdigit():
        raise SystemExit(__doc__)
    source = pathlib.Path(sys.argv[2]) if len(sys.argv) == 3 else ROOT / "examples" / "matmul.mlir"
    sys.stdout.write(many_kernels(source.read_text(), int(sys.argv[1])))


if __name__ == "__main__":
    main()
