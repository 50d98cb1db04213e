"""The GPU suites under a GpuOptions switch: TESSEL_TEST_GPU_OPTIONS="FIELD=VALUE[,...]" (e.g.
fuse_masked_loops=True) makes every kernel these tests compile use those fields
(bench_decode.options_from_environment, applied when it is imported); unset, the suites run
the defaults."""


def pytest_configure(config):
    import bench_decode
    config._tessel_gpu_options = bench_decode.ENV_OPTIONS


def pytest_report_header(config):
    fields = getattr(config, "_tessel_gpu_options", None)
    return f"GpuOptions switched for every kernel: {fields}" if fields else None
