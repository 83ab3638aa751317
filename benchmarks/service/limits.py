"""What the operator allows a shared server: memory, time, queue places, disk, admins.

One self-validating dataclass, read from the environment (``Limits.from_env()``), so the
worker, the queue's supervisor and the dashboard enforce the same figures. Torch-free: the
dashboard reads it to show the caps.

| variable | default | what it bounds |
|---|---|---|
| COMPRESSION_BENCH_MEMORY_SHARE | 0.5 | a job whose estimated peak exceeds this share of the memory available when it starts is refused before it allocates |
| COMPRESSION_BENCH_WORKER_MEMORY | 60% | the worker's hard limit (RLIMIT_DATA): bytes (``12G``, ``800M``), a share of the machine's memory (``60%``), or ``off`` (where a cgroup bounds the server instead) |
| COMPRESSION_BENCH_JOB_TIME_LIMIT | 7200 | seconds a job may run; then it stops (and its worker is killed if it does not) |
| COMPRESSION_BENCH_MAX_JOBS | 3 | jobs one person (signed-in user, else browser session) may have queued or running |
| COMPRESSION_BENCH_UPLOAD_MB | 1024 | total MB of uploaded checkpoints held at once (sessions' and queued jobs') |
| COMPRESSION_BENCH_CACHE_MB | 4096 | the weights cache's size; least recently used entries are evicted beyond it |
| COMPRESSION_BENCH_ADMINS | (none) | signed-in users (emails) who may cancel or delete anyone's jobs and runs |
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass, field

GIB = 2**30
MIB = 2**20
ENV = {
    "memory_share": "COMPRESSION_BENCH_MEMORY_SHARE",
    "worker_memory": "COMPRESSION_BENCH_WORKER_MEMORY",
    "job_time_s": "COMPRESSION_BENCH_JOB_TIME_LIMIT",
    "max_jobs": "COMPRESSION_BENCH_MAX_JOBS",
    "upload_mb": "COMPRESSION_BENCH_UPLOAD_MB",
    "cache_mb": "COMPRESSION_BENCH_CACHE_MB",
    "admins": "COMPRESSION_BENCH_ADMINS",
}
DEFAULT_WORKER_MEMORY = "60%"
NO_LIMIT = ("off", "none")


def total_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 16 * GIB


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


def parse_bytes(text: str, name: str) -> int:
    """``12G``, ``800M``, ``1073741824`` or ``60%`` (of the machine's memory) as bytes."""
    value = str(text).strip().upper().removesuffix("B")
    try:
        if value.endswith("%"):
            share = float(value[:-1]) / 100
            if not 0 < share <= 1:
                raise ValueError
            return int(share * total_memory_bytes())
        unit = {"K": 2**10, "M": MIB, "G": GIB, "T": 2**40}.get(value[-1:], 1)
        number = float(value[:-1] if value[-1:] in "KMGT" else value)
        if number <= 0:
            raise ValueError
        return int(number * unit)
    except (ValueError, IndexError):
        raise ValueError(f"{name} must be bytes such as 12G or 800M, a share such as 60%, or "
                         f"off; got {text!r}") from None


def gib(n: int | float) -> str:
    return f"{n / GIB:.1f} GiB"


@dataclass(frozen=True)
class Limits:
    memory_share: float = 0.5
    # Bytes the worker's data segment may reach; None: no hard limit.
    worker_memory: int | None = field(default_factory=lambda: parse_bytes(
        DEFAULT_WORKER_MEMORY, ENV["worker_memory"]))
    job_time_s: float = 7200.0
    max_jobs: int = 3
    upload_mb: int = 1024
    cache_mb: int = 4096
    admins: tuple[str, ...] = ()

    def __post_init__(self):
        def bad(name: str, accepted: str, got) -> None:
            raise ValueError(f"{ENV[name]} must be {accepted}; got {got!r}")

        if not 0 < self.memory_share <= 1:
            bad("memory_share", "a share in (0, 1]", self.memory_share)
        if self.worker_memory is not None and self.worker_memory < GIB:
            bad("worker_memory", "at least 1G (the worker's libraries alone take most of "
                "that), or off", self.worker_memory)
        if not 10 <= self.job_time_s <= 7 * 24 * 3600:
            bad("job_time_s", "seconds between 10 and a week", self.job_time_s)
        if not 1 <= self.max_jobs <= 1000:
            bad("max_jobs", "an integer between 1 and 1000", self.max_jobs)
        if not 1 <= self.upload_mb <= 10**6:
            bad("upload_mb", "MB between 1 and 1000000", self.upload_mb)
        if not 16 <= self.cache_mb <= 10**7:
            bad("cache_mb", "MB between 16 and 10000000", self.cache_mb)
        object.__setattr__(self, "admins", tuple(a.strip().lower() for a in self.admins
                                                 if a.strip()))

    @classmethod
    def from_env(cls, environ=None) -> "Limits":
        env = os.environ if environ is None else environ
        kwargs: dict = {}
        for name, var in ENV.items():
            text = env.get(var)
            if text is None or not text.strip():
                continue
            if name == "worker_memory":
                kwargs[name] = None if text.strip().lower() in NO_LIMIT \
                    else parse_bytes(text, var)
            elif name == "admins":
                kwargs[name] = tuple(text.split(","))
            else:
                kind = int if name in ("max_jobs", "upload_mb", "cache_mb") else float
                try:
                    kwargs[name] = kind(text)
                except ValueError:
                    raise ValueError(f"{var} must be a number; got {text!r}") from None
        return cls(**kwargs)

    def is_admin(self, identity: str | None) -> bool:
        return identity is not None and identity.lower() in self.admins


# -- the worker's hard memory limit ---------------------------------------------------------

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
