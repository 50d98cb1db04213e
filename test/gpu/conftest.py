"""The GPU suites under a GpuOptions switch: TESSEL_TEST_GPU_OPTIONS="FIELD=VALUE[,...]" (e.g.
fuse_masked_loops=True) makes every kernel these tests compile use those fields
(bench_decode.options_from_environment, applied when it is imported); unset, the suites run
the defaults. TESSEL_GPU_SHARD="I/N" runs one shard of a suite (shard.py)."""

import shard

pytest_collection_modifyitems = shard.pytest_collection_modifyitems   # a hook: found here


def pytest_configure(config):
    import bench_decode
    config._tessel_gpu_options = bench_decode.ENV_OPTIONS


def pytest_report_header(config):
    fields = getattr(config, "_tessel_gpu_options", None)
    lines = [f"GpuOptions switched for every kernel: {fields}"] if fields else []
    shard_line = shard.pytest_report_header(config)
    return lines + ([shard_line] if shard_line else []) or None
