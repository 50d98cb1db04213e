#!/usr/bin/env bash
# Thirtieth session, call 1: the GPU suites on the defaults of the twenty-ninth session (EVEN_N,
# the diagonal block first, compiles ahead), four processes at once, each bounded.
exec bash "$(dirname "$0")/../2026-12-05-s28/run1.sh"
