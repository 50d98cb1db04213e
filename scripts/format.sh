#!/usr/bin/env bash
# Formats the tracked C++ files (`git ls-files '*.cpp' '*.h'`) with Debian's clang-format and the
# repository's .clang-format, installing clang-format with apt if it is missing.
#   bash scripts/format.sh            rewrites the files in place
#   bash scripts/format.sh --check    changes nothing; lists the files that are not formatted and
#                                     exits 1 if there is any (for CI)
# Paths after the options restrict it to those files.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi

if ! command -v clang-format >/dev/null; then
  echo "tessel format: installing clang-format"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq clang-format >/dev/null
fi

if [ $# -gt 0 ]; then files=("$@"); else mapfile -t files < <(git ls-files '*.cpp' '*.h'); fi
[ ${#files[@]} -gt 0 ] || exit 0

if [ $check -eq 0 ]; then
  clang-format -i --style=file "${files[@]}"
  exit 0
fi
unformatted=0
for f in "${files[@]}"; do
  if ! clang-format --style=file --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "$f"
    unformatted=$((unformatted + 1))
  fi
done
echo "$unformatted of ${#files[@]} files are not formatted ($(clang-format --version))"
[ $unformatted -eq 0 ]
