"""A sweep, run: from a ``SweepSpec`` to one ``VariantResult`` per variant.

The runner (``runner``: validation before anything allocates, the baseline, building and
measuring each variant), the weights cache (``cache``, on disk; ``weights``, in memory, keyed
alike), the estimate shown before a sweep runs (``estimate``, torch-free) and the admission
check of its peak memory (``footprint``).
"""

__all__ = ["cache", "estimate", "footprint", "runner", "weights"]
