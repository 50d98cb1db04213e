#!/usr/bin/env bash
# The twenty-fourth session's run7.sh, never run (no machine was lent in the twenty-fifth either):
# two device calls, `run2.sh 1` then `run2.sh 2` (each under 600 s); they write run7-1 / run7-2.
exec bash "$(dirname "$0")/../2026-12-04-h200-s24/run7.sh" "$@"
