"""The tessel version, in a module of its own so that everything naming it (the kernel cache key in
cache.py, the headers aot.py writes) imports it without importing the JIT.

Keep it equal to ``version`` in pyproject.toml.
"""
VERSION = "0.1.0"
