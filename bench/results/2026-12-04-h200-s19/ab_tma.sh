# The interleaved A/B of the TMA producer: processes alternating tma / default, $2 rounds
# (default 2); then the medians. Run from test/gpu with the bundle's PYTHONPATH; $1 = the
# output folder.
set -u
here=$(dirname "$0")
for i in $(seq 1 "${2:-2}"); do
  for mode in tma default; do
    timeout 75 python3 "$here/ab_tma.py" $mode "$1/ab-$mode-$i.json" || echo "ab $mode $i failed"
  done
done
python3 - "$1" <<'PY'
import glob, json, statistics, sys
runs = {m: [json.load(open(f))["rows"] for f in sorted(glob.glob(f"{sys.argv[1]}/ab-{m}-*.json"))]
        for m in ("tma", "default")}
for case in runs["default"][0]:
    a = [r[case] for r in runs["tma"]]; b = [r[case] for r in runs["default"]]
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"{case:>22} tma {ma:7.1f}  default {mb:7.1f}  {ma / mb:5.3f}  "
          f"({min(a):.0f}-{max(a):.0f} / {min(b):.0f}-{max(b):.0f})")
PY
