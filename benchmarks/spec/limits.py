"""What the operator allows a shared server: memory, time, queue places, disk, admins.

One self-validating dataclass, read from the environment (``Limits.from_env()``), so the
worker, the queue's supervisor and the dashboard enforce the same figures. Torch-free: the
dashboard reads it to show the caps. What the machine has and what a process holds (the
probes the limits are checked against) live in ``benchmarks.measure.machine``.

| variable | default | what it bounds |
|---|---|---|
| COMPRESSION_BENCH_MEMORY_SHARE | 0.5 | a job whose estimated peak exceeds this share of the memory available when it starts is refused before it allocates |
| COMPRESSION_BENCH_WORKER_MEMORY | 60% | the worker's hard limit (RLIMIT_DATA): bytes (``12G``, ``800M``), a share of the machine's memory (``60%``), or ``off`` (where a cgroup bounds the server instead) |
| COMPRESSION_BENCH_JOB_TIME_LIMIT | 7200 | seconds a job may run; then it stops (and its worker is killed if it does not) |
| COMPRESSION_BENCH_MAX_JOBS | 3 | jobs one person (signed-in user, else browser session) may have queued or running |
| COMPRESSION_BENCH_MAX_JOBS_PER_ADDRESS | 3 | without sign-in: jobs queued or running from one client address, whatever its sessions |
| COMPRESSION_BENCH_MAX_ANONYMOUS_JOBS | 10 | without sign-in: jobs queued or running from every session together |
| COMPRESSION_BENCH_UPLOAD_MB | 1024 | total MB of uploads held at once: in the server's memory while they arrive and before submission, and on disk by queued jobs |
| COMPRESSION_BENCH_SESSION_UPLOAD_MB | 400 | MB of uploads one browser session may hold in the server's memory |
| COMPRESSION_BENCH_EXPORT_MB | 4096 | the dashboard's exports on disk; least recently used exports are removed beyond it |
| COMPRESSION_BENCH_SHARED_EXPORTS | off | on: anyone who can open a run may export its models (by default only its owner and admins) |
| COMPRESSION_BENCH_CACHE_MB | 4096 | the weights cache's size; least recently used entries are evicted beyond it |
| COMPRESSION_BENCH_ADMINS | (none) | signed-in users (emails) who may cancel or delete anyone's jobs and runs |
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

GIB = 2**30
MIB = 2**20
ENV = {
    "memory_share": "COMPRESSION_BENCH_MEMORY_SHARE",
    "worker_memory": "COMPRESSION_BENCH_WORKER_MEMORY",
    "job_time_s": "COMPRESSION_BENCH_JOB_TIME_LIMIT",
    "max_jobs": "COMPRESSION_BENCH_MAX_JOBS",
    "max_jobs_per_address": "COMPRESSION_BENCH_MAX_JOBS_PER_ADDRESS",
    "max_anonymous_jobs": "COMPRESSION_BENCH_MAX_ANONYMOUS_JOBS",
    "upload_mb": "COMPRESSION_BENCH_UPLOAD_MB",
    "session_upload_mb": "COMPRESSION_BENCH_SESSION_UPLOAD_MB",
    "export_mb": "COMPRESSION_BENCH_EXPORT_MB",
    "shared_exports": "COMPRESSION_BENCH_SHARED_EXPORTS",
    "cache_mb": "COMPRESSION_BENCH_CACHE_MB",
    "admins": "COMPRESSION_BENCH_ADMINS",
}
DEFAULT_WORKER_MEMORY = "60%"
NO_LIMIT = ("off", "none")
ON, OFF = ("1", "on", "yes", "true"), ("0", "off", "no", "false")
INTEGERS = ("max_jobs", "max_jobs_per_address", "max_anonymous_jobs", "upload_mb",
            "session_upload_mb", "cache_mb", "export_mb")


def total_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 16 * GIB


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
    max_jobs_per_address: int = 3
    max_anonymous_jobs: int = 10
    upload_mb: int = 1024
    session_upload_mb: int = 400
    cache_mb: int = 4096
    export_mb: int = 4096
    shared_exports: bool = False
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
        for name in ("max_jobs", "max_jobs_per_address", "max_anonymous_jobs"):
            if not 1 <= getattr(self, name) <= 1000:
                bad(name, "an integer between 1 and 1000", getattr(self, name))
        for name in ("upload_mb", "session_upload_mb"):
            if not 1 <= getattr(self, name) <= 10**6:
                bad(name, "MB between 1 and 1000000", getattr(self, name))
        for name in ("cache_mb", "export_mb"):
            if not 16 <= getattr(self, name) <= 10**7:
                bad(name, "MB between 16 and 10000000", getattr(self, name))
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
            elif name == "shared_exports":
                word = text.strip().lower()
                if word not in ON + OFF:
                    raise ValueError(f"{var} must be on or off; got {text!r}")
                kwargs[name] = word in ON
            else:
                kind = int if name in INTEGERS else float
                try:
                    kwargs[name] = kind(text)
                except ValueError:
                    raise ValueError(f"{var} must be a number; got {text!r}") from None
        return cls(**kwargs)

    def is_admin(self, identity: str | None) -> bool:
        return identity is not None and identity.lower() in self.admins
