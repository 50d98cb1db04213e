"""The loops of a kernel's SASS (nvdisasm -c output: FILE), found by their backward branches,
with their HGMMA and spill (STL/LDL) instruction counts: where a kernel's spill sits.

    nvdisasm -c kernel.cubin > kernel.sass && python3 sass_loops.py kernel.sass
"""
import re, sys
lines = open(sys.argv[1]).read().split("\n")
labels = {}
for i, l in enumerate(lines):
    m = re.match(r"^\s*(\.L_x_\d+):", l)
    if m: labels[m.group(1)] = i
loops = []
for i, l in enumerate(lines):
    m = re.search(r"BRA\s+`\((\.L_x_\d+)\)", l)
    if m and labels.get(m.group(1), 1 << 30) < i:
        loops.append((labels[m.group(1)], i))
for a, b in loops:
    body = lines[a:b + 1]
    spills = sum(1 for x in body if re.search(r"\b(STL|LDL)", x))
    hg = sum(1 for x in body if "HGMMA" in x)
    if hg:
        print(f"loop {a}-{b}: {b - a} lines, HGMMA {hg}, spill ops {spills}")
tot = sum(1 for x in lines if re.search(r"\b(STL|LDL)", x))
print("spill ops in all", tot)
