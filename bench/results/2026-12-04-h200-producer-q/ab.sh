# The interleaved A/B: three processes each way, alternating; then the medians.
# Run from test/gpu with the bundle's PYTHONPATH; $1 = the output folder.
set -u
here=$(dirname "$0")
for i in 1 2 3; do
  for mode in on off; do
    timeout 150 python3 "$here/ab.py" $mode "$1/ab-$mode-$i.json" || echo "ab $mode $i failed"
  done
done
python3 - "$1" <<'PY'
import glob, json, statistics, sys
runs = {m: [json.load(open(f))["rows"] for f in sorted(glob.glob(f"{sys.argv[1]}/ab-{m}-*.json"))]
        for m in ("on", "off")}
for case in runs["off"][0]:
    a = [r[case] for r in runs["on"]]; b = [r[case] for r in runs["off"]]
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"{case:>22} producer-once {ma:7.1f}  default {mb:7.1f}  {ma / mb:5.3f}  "
          f"({min(a):.0f}-{max(a):.0f} / {min(b):.0f}-{max(b):.0f})")
PY
