"""`NAME=VALUE` fields, as the GPU benchmarks' --set, --grid and --base and
TESSEL_TEST_GPU_OPTIONS give them: one parser for all of them, in a module that imports
nothing (scripts/bench_cold_compile.py reads it without tessel on its path)."""


def parse_set(items):
    """Fields from `NAME=VALUE` items (the benchmarks' --set, TESSEL_TEST_GPU_OPTIONS): a value
    is True / False, an int, else the text. ValueError for an item without `=`."""
    fields = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise ValueError(f"expected NAME=VALUE, got {item!r}")
        if text in ("True", "False"):
            fields[name] = text == "True"
        else:
            try:
                fields[name] = int(text)
            except ValueError:
                fields[name] = text
    return fields
