"""A pytest plugin that runs one shard of a suite: TESSEL_GPU_SHARD="I/N" (0 <= I < N) keeps
every N-th collected test from the I-th on. A suite longer than one device call (the backward
suite takes ~10 minutes on an H100) then runs in N calls, I = 0..N-1, each test exactly once.
test/gpu/conftest.py takes its hooks; test/python/test_gpu_shard.py checks it without a GPU."""

import os

import pytest


def shard_of(text):
    """(I, N) from "I/N", None from ""; anything else is a UsageError, not a silent full run."""
    if not text:
        return None
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        index, count = -1, 0
    if not 0 <= index < count:
        raise pytest.UsageError(f"TESSEL_GPU_SHARD={text!r}: expected I/N with 0 <= I < N")
    return index, count


def pytest_collection_modifyitems(config, items):
    shard = shard_of(os.environ.get("TESSEL_GPU_SHARD", ""))
    if shard is None:
        return
    index, count = shard
    config.hook.pytest_deselected(items=[t for i, t in enumerate(items) if i % count != index])
    items[:] = [t for i, t in enumerate(items) if i % count == index]


def pytest_report_header(config):
    shard = shard_of(os.environ.get("TESSEL_GPU_SHARD", ""))
    return f"shard {shard[0]} of {shard[1]} (TESSEL_GPU_SHARD)" if shard else None
