"""The command line: ``compression-bench`` (= ``python -m benchmarks``).

``main`` holds the one error boundary and dispatches run | list | history | report | export |
distributed; ``parser`` builds the one parser from the registries (techniques, data sets,
``DistributedConfig``'s fields); ``run``, ``listing``, ``handoff`` and ``distributed`` hold the
commands, ``outputs`` the exit statuses and the output files' checks. Bad input is one line on
stderr and exit 2.
"""

__all__ = ["distributed", "handoff", "listing", "main", "outputs", "parser", "run"]
