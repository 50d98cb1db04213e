"""GPU suites under a GpuOptions switch: TESSEL_TEST_GPU_OPTIONS="FIELD=VALUE[,FIELD=VALUE]"
(e.g. fuse_masked_loops=True) makes every kernel these tests compile use those fields, so that a
code-generation switch that is not yet the default meets every reference check here before it
becomes one. Unset, the suites run the defaults."""
import os


def pytest_configure(config):
    spec = os.environ.get("TESSEL_TEST_GPU_OPTIONS", "")
    if not spec:
        return
    fields = {}
    for item in spec.split(","):
        name, _, text = item.partition("=")
        fields[name.strip()] = {"True": True, "False": False}.get(text.strip(), text.strip())
    from bench_decode import compile_with
    compile_with(**fields)
    config.stash_gpu_options = fields


def pytest_report_header(config):
    fields = getattr(config, "stash_gpu_options", None)
    return f"GpuOptions switched for every kernel: {fields}" if fields else None
