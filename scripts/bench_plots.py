#!/usr/bin/env python3
"""Plots of a GPU check's speed results: tessel beside cuDNN, FlashAttention-2 and FlexAttention.

    python3 scripts/bench_plots.py bench/results/2026-12-01-h200-merged [-o docs/bench/img/...]
    python3 scripts/bench_plots.py build/gpu-check --single -o build/gpu-check   (gpu-check.sh)

Reads the JSON that test/gpu/check_attention_wgmma.py and check_attention_mma.py write
(attention_wgmma.json, attention_mma.json and, from TESSEL_GPU_CHECK_BEFORE runs, their
*_before.json) and writes PNGs (matplotlib, Agg backend):

- forward-tflops.png: fp16 forward TFLOP/s per shape, tessel.attention's default on sm_90a
  (the wgmma path with its default blocks) beside FA2, cuDNN and, where the run measured it,
  FlexAttention;
- forward-ratio.png: the same as ratios, tessel / cuDNN and tessel / FA2;
- mma-tflops.png: the mma.sync path (the sm_80 code) per block size, beside FA2 and cuDNN;
- before-after.png (runs with *_before.json): after / before per row.

--single writes one speed.png with every panel instead (one file to carry back). Each figure
names the machine (from the JSON's "gpu:" lines) and the date (the folder name's leading
YYYY-MM-DD, else --date, else today). Exit code 1 when the folder holds no speed results.
"""
import argparse
import datetime
import json
import pathlib
import re
import sys

# tessel.attention's blocks on sm_90a (python/tessel/attention.py, GPU_BLOCKS), as the wgmma
# check names its configurations; read from tessel where it can be imported.
DEFAULT_WGMMA = {64: "wgmma_64x128", 128: "wgmma_64"}

COLORS = {"tessel": "#1f6fb4", "FA2": "#8c8c8c", "cuDNN": "#2a2a2a", "FlexAttention": "#d9822b"}


def default_configs():
    try:
        from tessel.attention import GPU_BLOCKS
    except Exception:  # no tessel here (the plain script on a results folder): the copy above
        return DEFAULT_WGMMA
    return {d: f"wgmma_{bm}" + (f"x{bn}" if bn != 64 else "")
            for (chip, d), (bm, bn) in GPU_BLOCKS.items() if chip == "sm_90a"}


def load(folder, name):
    path = folder / name
    if not path.exists():
        return None
    return json.loads(path.read_text())


def tflops(entry):
    return entry.get("tflops") if isinstance(entry, dict) and entry.get("ok", True) else None


def shape_label(row, sep=" "):
    n = row["n"]
    n = f"{n // 1024}k" if n % 1024 == 0 else str(n)
    return f"d{row['d']} n{n}" + (f"{sep}causal" if row["causal"] else "")


def machine_of(*results):
    for result in results:
        for part in ("speed", "correctness"):
            for row in (result or {}).get(part, []):
                for entry in [row, *row.values()]:
                    line = entry.get("gpu") if isinstance(entry, dict) else None
                    if isinstance(line, str) and line.startswith("gpu: "):
                        device, chip = line[5:].split(", ")[:2]
                        return f"{device} ({chip})"
    return "unknown GPU"


def baselines(row):
    """{name: TFLOP/s} of the anchors measured for this row."""
    sdpa = row.get("sdpa", {})
    out = {}
    for key, name in (("flash", "FA2"), ("cudnn", "cuDNN"), ("flex", "FlexAttention")):
        value = tflops(sdpa.get(key)) or tflops(row.get(key))
        if value:
            out[name] = value
    return out


def wgmma_rows(result, configs):
    """[(label, tessel TFLOP/s, block name, {anchor: TFLOP/s})] of the wgmma speed table."""
    rows = []
    for row in (result or {}).get("speed", []):
        key = configs.get(row["d"])
        value = tflops(row.get(key))
        if value is None:
            continue
        block = key.replace("wgmma_", "")
        block = f"d{row['d']} " + (block if "x" in block else f"{block}x64")
        rows.append((shape_label(row), value, block, baselines(row)))
    return rows


def mma_rows(result):
    """[(label, TFLOP/s, {anchor: TFLOP/s})] of the mma.sync speed table, one per block."""
    rows = []
    for row in (result or {}).get("speed", []):
        value = tflops(row.get("tessel_mma"))
        if value is not None:
            rows.append((f"{shape_label(row, chr(10))}\n{row['bm']}x{row['bn']}", value,
                         baselines(row)))
    return rows


def grouped_bars(ax, labels, series, ylabel):
    """series: [(name, [value or None per label])]."""
    width = 0.8 / len(series)
    for i, (name, values) in enumerate(series):
        xs = [x + (i - (len(series) - 1) / 2) * width for x in range(len(labels))]
        kept = [(x, v) for x, v in zip(xs, values) if v is not None]
        bars = ax.bar([x for x, _ in kept], [v for _, v in kept], width, label=name,
                      color=COLORS.get(name.split(" ")[0]))
        if name.startswith("tessel"):
            ax.bar_label(bars, fmt="%.0f", fontsize=7, padding=2)
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    top = max(v for _, values in series for v in values if v is not None)
    ax.set_ylim(0, top * 1.18)  # room for the legend above the bars
    ax.legend(fontsize=8, loc="upper center", ncol=len(series), frameon=False)


def anchor_series(rows, pick):
    names = [n for n in ("FA2", "cuDNN", "FlexAttention") if any(n in pick(r) for r in rows)]
    return [(n, [pick(r).get(n) for r in rows]) for n in names]


def panel_forward(ax, rows, where):
    labels = [r[0] for r in rows]
    blocks = sorted({r[2] for r in rows})
    series = [(f"tessel (wgmma, blocks {', '.join(blocks)})", [r[1] for r in rows])]
    grouped_bars(ax, labels, series + anchor_series(rows, lambda r: r[3]), "TFLOP/s")
    ax.set_title(f"Attention forward, fp16, TFLOP/s: tessel.attention's default beside the "
                 f"SDPA anchors\n{where}", fontsize=10)


def panel_ratio(ax, rows, where):
    labels = [r[0] for r in rows]
    series = []
    for name in ("cuDNN", "FA2", "FlexAttention"):
        values = [r[1] / r[3][name] if name in r[3] else None for r in rows]
        if any(v is not None for v in values):
            series.append((f"tessel / {name}", values))
    width = 0.8 / max(len(series), 1)
    colors = {"cuDNN": COLORS["cuDNN"], "FA2": COLORS["FA2"], "FlexAttention": COLORS["FlexAttention"]}
    for i, (name, values) in enumerate(series):
        xs = [x + (i - (len(series) - 1) / 2) * width for x in range(len(labels))]
        kept = [(x, v) for x, v in zip(xs, values) if v is not None]
        bars = ax.bar([x for x, _ in kept], [v for _, v in kept], width, label=name,
                      color=colors[name.split(" / ")[1]])
        ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=2)
    ax.axhline(1.0, color="#c0392b", linewidth=1, linestyle="--")
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylabel("speed ratio (> 1: tessel faster)")
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    top = max(v for _, values in series for v in values if v is not None)
    ax.set_ylim(0, max(top, 1.0) * 1.18)
    ax.legend(fontsize=8, loc="upper center", ncol=len(series), frameon=False)
    ax.set_title(f"Attention forward, fp16: tessel.attention's default relative to cuDNN and "
                 f"FA2\n{where}", fontsize=10)


def panel_mma(ax, rows, where):
    labels = [r[0] for r in rows]
    series = [("tessel (mma.sync, the sm_80 code)", [r[1] for r in rows])]
    grouped_bars(ax, labels, series + anchor_series(rows, lambda r: r[2]), "TFLOP/s")
    ax.tick_params(axis="x", labelsize=7)
    ax.set_title(f"Attention forward, fp16, TFLOP/s: the mma.sync path per block (query x "
                 f"key) beside the SDPA anchors\n{where}", fontsize=10)


def before_after_rows(folder, configs):
    """[(label, after / before)] for every table with a *_before.json."""
    rows = []
    after, before = load(folder, "attention_mma.json"), load(folder, "attention_mma_before.json")
    if after and before:
        old = {(r["d"], r["n"], r["causal"], r["bm"], r["bn"]): tflops(r.get("tessel_mma"))
               for r in before.get("speed", [])}
        for r in after.get("speed", []):
            prev, now = old.get((r["d"], r["n"], r["causal"], r["bm"], r["bn"])), \
                tflops(r.get("tessel_mma"))
            if prev and now:
                rows.append((f"mma.sync {shape_label(r)} {r['bm']}x{r['bn']}", now / prev))
    after, before = load(folder, "attention_wgmma.json"), \
        load(folder, "attention_wgmma_before.json")
    if after and before:
        old = {(r["d"], r["n"], r["causal"]): r for r in before.get("speed", [])}
        for r in after.get("speed", []):
            key = configs.get(r["d"])
            prev = tflops(old.get((r["d"], r["n"], r["causal"]), {}).get(key))
            now = tflops(r.get(key))
            if prev and now:
                rows.append((f"wgmma (default blocks) {shape_label(r)}", now / prev))
    return rows


def panel_before_after(ax, rows, where):
    labels = [r[0] for r in rows]
    ys = range(len(rows))[::-1]  # the first row on top
    bars = ax.barh(ys, [r[1] for r in rows], 0.6, color=COLORS["tessel"])
    ax.bar_label(bars, fmt="%.3f", fontsize=7, padding=2)
    ax.axvline(1.0, color="#c0392b", linewidth=1, linestyle="--")
    low = min(r[1] for r in rows)
    high = max(r[1] for r in rows)
    ax.set_xlim(min(0.9, low - 0.02), max(1.1, high + 0.03))
    ax.set_yticks(ys, labels, fontsize=7)
    ax.set_xlabel("after / before (> 1: faster)")
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    ax.set_title(f"Before and after in one run, fp16 forward TFLOP/s\n{where}", fontsize=10)


def run_date(folder, given):
    if given:
        return given
    m = re.match(r"(\d{4}-\d{2}-\d{2})", folder.resolve().name)
    return m.group(1) if m else datetime.date.today().isoformat()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", type=pathlib.Path, help="a folder of GPU check results")
    ap.add_argument("-o", "--output", type=pathlib.Path,
                    help="where the PNGs go (default: docs/bench/img/<folder name>)")
    ap.add_argument("--date", help="the run's date (default: from the folder name, else today)")
    ap.add_argument("--single", action="store_true", help="one speed.png with every panel")
    opts = ap.parse_args(argv)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = opts.results
    out = opts.output or pathlib.Path(__file__).resolve().parents[1] / "docs" / "bench" / \
        "img" / folder.resolve().name
    wgmma, mma = load(folder, "attention_wgmma.json"), load(folder, "attention_mma.json")
    configs = default_configs()
    where = f"{machine_of(wgmma, mma)}, {run_date(folder, opts.date)}"
    panels = []
    fwd = wgmma_rows(wgmma, configs)
    if fwd:
        panels += [("forward-tflops", panel_forward, fwd, 4.2),
                   ("forward-ratio", panel_ratio, fwd, 4.2)]
    mrows = mma_rows(mma)
    if mrows:
        panels.append(("mma-tflops", panel_mma, mrows, 4.8))
    ba = before_after_rows(folder, configs)
    if ba:
        panels.append(("before-after", panel_before_after, ba, 1.2 + 0.25 * len(ba)))
    if not panels:
        print(f"bench_plots: no speed results in {folder} (attention_wgmma.json, "
              "attention_mma.json)", file=sys.stderr)
        return 1

    out.mkdir(parents=True, exist_ok=True)
    written = []
    if opts.single:
        fig, axes = plt.subplots(len(panels), 1, figsize=(12, sum(p[3] for p in panels)),
                                 squeeze=False)
        for ax, (_, draw, rows, _) in zip(axes[:, 0], panels):
            draw(ax, rows, where)
        fig.tight_layout()
        written.append(out / "speed.png")
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)
    else:
        for name, draw, rows, height in panels:
            fig, ax = plt.subplots(figsize=(13 if len(rows) > 8 else 10, height))
            draw(ax, rows, where)
            fig.tight_layout()
            written.append(out / f"{name}.png")
            # Fixed metadata: the same results give the same bytes (no date of the run of this
            # script in the PNG).
            fig.savefig(written[-1], dpi=110, metadata={"Software": None})
            plt.close(fig)
    for path in written:
        print(f"bench_plots: wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
