#!/usr/bin/env bash
# Twenty-seventh session, call 1: the twenty-fourth session's run7.sh part 2, never run — Q from
# the producer for d64's 4k causal rows (A/B), the block-mask tests with d256 (128x32 under mods,
# a shipped default never checked on a GPU) and d256 with mods at 128x32 against 128x64.
exec bash "$(dirname "$0")/../2026-12-04-h200-s24/run7.sh" 2
