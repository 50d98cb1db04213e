#!/usr/bin/env bash
# Runs ncu_fwd.py under Nsight Compute for each "impl n [causal]" given and writes, per case,
# the report (.ncu-rep), its details page and its SASS source page (stall samples per
# instruction) into $OUT. Usage: ncu_run.sh DIR "tessel 4096" "cudnn 4096" ...
set -u
here=$(cd "$(dirname "$0")" && pwd)
dir=$1; shift
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
echo "ncu: $ncu"
for case in "$@"; do
  set -- $case
  name="$1_$2${3:+_c}"
  timeout 240 "$ncu" --profile-from-start off --clock-control none --set full \
    --import-source no -f -o "$dir/$name" \
    python3 "$here/ncu_fwd.py" --impl "$1" --n "$2" ${3:+--causal} > "$dir/$name.log" 2>&1
  echo "$name rc=$? $(tail -1 "$dir/$name.log")"
  "$ncu" --import "$dir/$name.ncu-rep" --page details --print-units base > "$dir/$name.details.txt" 2>&1
  "$ncu" --import "$dir/$name.ncu-rep" --page raw --csv > "$dir/$name.raw.csv" 2>&1
  "$ncu" --import "$dir/$name.ncu-rep" --page source --csv --print-source sass > "$dir/$name.sass.csv" 2>&1
done
