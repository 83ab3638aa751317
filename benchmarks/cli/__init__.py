"""The command line: ``compression-bench`` (= ``python -m benchmarks``).

``main`` parses and dispatches run | list | history | report | export | distributed; bad input
is one line on stderr and exit 2.
"""

__all__ = ["main"]
