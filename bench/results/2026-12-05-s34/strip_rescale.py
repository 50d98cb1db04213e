import re, sys
src, dst = sys.argv[1:3]
lines = open(src).read().split("\n")
out = []; alphas = set(); removed = 0
for i, l in enumerate(lines):
    m = re.match(r"\s*ex2\.approx\.ftz\.f32\s+(%r\d+), (%r\d+);", l)
    if m and any("wait_group.sync.aligned 0" in x for x in lines[max(0, i-12):i]):
        alphas.add(m.group(1))
    m = re.match(r"\s*mul\.rn\.f32\s+(%r\d+), (%r\d+), (%r\d+);", l)
    if m and m.group(1) == m.group(2) and m.group(3) in alphas:
        removed += 1; continue
    out.append(l)
open(dst, "w").write("\n".join(out))
print(src, "alphas", sorted(alphas), "removed", removed)
