"""What this machine and this process hold: memory available, the data segment, its limit.

The probes the operator's limits (``benchmarks.spec.limits``) are checked against, and the
hard limit itself (RLIMIT_DATA). Read from /proc and ``resource``: no torch, so the dashboard
and the admission check ask them before anything heavy is imported.
"""

from __future__ import annotations

import resource

from benchmarks.spec.limits import gib, total_memory_bytes

__all__ = ["available_memory_bytes", "apply_memory_limit", "memory_limit",
           "data_segment_bytes", "is_out_of_memory", "out_of_memory_label",
           "total_memory_bytes"]


def _proc_bytes(path: str, field: str) -> int | None:
    """A ``Field:  N kB`` line of a /proc file, in bytes (None when absent)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def available_memory_bytes() -> int:
    """What the kernel says a new allocation can get without swapping (MemAvailable)."""
    found = _proc_bytes("/proc/meminfo", "MemAvailable")
    return total_memory_bytes() if found is None else found


def apply_memory_limit(limit: int) -> None:
    """Cap this process's data segment (RLIMIT_DATA: heap and private anonymous mappings,
    which is where every tensor lives; unlike RLIMIT_AS it does not count the address space
    libraries reserve but never touch). Going over fails the allocation, so the job gets an
    error instead of the machine swapping or the kernel's OOM killer choosing a victim.
    Children (distributed ranks) inherit it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


def memory_limit() -> int | None:
    """This process's data-segment limit in bytes, or None when unlimited."""
    soft, _ = resource.getrlimit(resource.RLIMIT_DATA)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def data_segment_bytes() -> int:
    """What counts against RLIMIT_DATA now (VmData), 0 when unknown."""
    return _proc_bytes("/proc/self/status", "VmData") or 0


def is_out_of_memory(exc: BaseException | None) -> bool:
    """An allocation that failed: Python's MemoryError, torch's OutOfMemoryError, or the CPU
    allocator's RuntimeError (what RLIMIT_DATA makes of an allocation over the limit), also
    when another error was raised while handling it (a model factory's one-line error)."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
            return True
        text = str(exc)
        if isinstance(exc, RuntimeError) and ("can't allocate memory" in text
                                              or "Cannot allocate memory" in text):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def out_of_memory_label() -> str:
    """'out of memory (limit 4.0 GiB)': what a job that went over its limit says."""
    limit = memory_limit()
    return "out of memory" + (f" (limit {gib(limit)})" if limit else "")
