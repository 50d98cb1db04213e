#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs every test (lit/FileCheck, C++ unit
# tests, Python tests) and ends with one line `N passed, N failed` summing all of them.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
start=$(date +%s)
"$root/scripts/build.sh" || { echo "build failed"; echo "0 passed, 1 failed"; exit 1; }
build="$root/build"
results="$build/test-results"
rm -rf "$results" && mkdir -p "$results"
PYTHON=${PYTHON:-$(command -v python3)}

echo "== lit"
/usr/lib/llvm-22/bin/lit -sv "$build/test" --xunit-xml-output "$results/lit.xml"
echo "== C++ unit tests"
"$build/bin/tessel-unittests" --gtest_brief=1 --gtest_output="xml:$results/unit.xml"
echo "== Python tests"
TESSEL_BUILD_DIR="$build" PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m pytest -q "$root/test/python" --junitxml "$results/python.xml" \
  -p no:cacheprovider

echo "== $(( $(date +%s) - start )) s"
"$PYTHON" "$root/scripts/junit_summary.py" "$results"/*.xml
