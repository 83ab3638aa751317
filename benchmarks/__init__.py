"""The engine: everything behind the CLI and the dashboard, in layers (lowest first).

``spec`` (torch-free: what is asked and what is allowed) -> ``zoo`` (where models and data
come from) and ``measure`` (latency, memory, size, peaks, roofline, the machine, the
environment card) -> ``report`` (results, statistics, comparison rows, figures, the HTML
report) -> ``run`` (the sweep runner, its timing rounds, the weights cache, estimates,
admission) and ``store`` (the SQLite results store) -> ``export`` and ``executors`` (where
builds run) -> ``distributed`` (the data-parallel benchmark) -> ``service`` (the job queue, its
supervisor and worker) -> ``cli``. Each imports only from below (``pyproject.toml``'s
import-linter contract, checked by ``make test``); ``optimizers`` sits under all of them.
"""

__all__ = ["spec", "zoo", "measure", "report", "run", "store", "export", "executors",
           "distributed", "service", "cli"]
