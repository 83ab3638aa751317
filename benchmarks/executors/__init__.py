"""Where a sweep's builds run: here (the default), on the machine's other GPUs, or as tasks
on a Ray cluster. An executor only trains: every trained weight comes back under its cache
key, and the sweep then builds and measures its variants from those weights, on one device, in
the interleaved rounds of an ordinary run. Results are therefore the local executor's,
whatever ran where (each training step's data and seed come from its own key).
"""

__all__ = ["devices", "pool", "ray_executor", "tasks"]
