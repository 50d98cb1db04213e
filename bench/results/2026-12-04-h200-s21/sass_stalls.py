"""Summarises an `ncu --page source --csv --print-source sass` export: per kernel, warp-stall
samples by reason, executed instructions by opcode, and the instructions with the most samples.

    python3 sass_stalls.py FILE.sass.csv [--kernel SUBSTR] [--top 25]
"""
import argparse
import csv
import collections


def kernels(path):
    """Yields (kernel name, header, rows) for each kernel block of the export."""
    name, header, rows = None, None, []
    with open(path, newline="") as f:
        for rec in csv.reader(f):
            if rec and rec[0] == "Kernel Name":
                if name:
                    yield name, header, rows
                name, header, rows = rec[1], None, []
            elif rec and rec[0] == "Address":
                header = rec
            elif header and rec:
                rows.append(dict(zip(header, rec)))
    if name:
        yield name, header, rows


def num(s):
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--kernel", default="")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    for name, header, rows in kernels(args.path):
        if args.kernel not in name:
            continue
        reasons = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
        total = sum(num(r["Warp Stall Sampling (All Samples)"]) for r in rows)
        print(f"== {name[:100]}  instructions {len(rows)}  samples {total:.0f}")
        by = {h: sum(num(r[h]) for r in rows) for h in reasons}
        print("  stalls: " + ", ".join(f"{h[6:]} {v / total:.1%}" for h, v in
                                       sorted(by.items(), key=lambda x: -x[1]) if v / total > 0.005))
        ops = collections.Counter()
        for r in rows:
            op = r["Source"].split()
            op = [t for t in op if not t.startswith("@")]
            ops[op[0].split(".")[0] if op else "?"] += num(r["Instructions Executed"])
        n = sum(ops.values())
        print(f"  executed {n:.3e}: " + ", ".join(f"{o} {c / n:.1%}" for o, c in ops.most_common(18)))
        top = sorted(rows, key=lambda r: -num(r["Warp Stall Sampling (All Samples)"]))[:args.top]
        for r in top:
            s = num(r["Warp Stall Sampling (All Samples)"])
            main_r = max(reasons, key=lambda h: num(r[h]))
            print(f"  {r['Address'][-5:]} {s / total:6.2%} {main_r[6:]:>12}  {r['Source'].strip()[:90]}")


if __name__ == "__main__":
    main()
