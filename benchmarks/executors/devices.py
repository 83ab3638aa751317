"""This machine's accelerators as the queue sees them, and who may use each one now.

Each GPU has a busy lock (an ``flock`` on a file beside the store): held by the queue worker
that runs a job on it, for the whole job, and by a sweep that borrows an idle GPU to train
some of its variants. So no two timings ever share a GPU, and no build disturbs a timing; the
kernel drops a lock when its holder dies, however it dies.

``COMPRESSION_BENCH_FAKE_GPUS=N`` makes the queue believe in N GPUs that compute on the CPU:
the multi-GPU scheduling is then exercised (tests, demos) on a machine without one.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path

FAKE_GPUS_ENV = "COMPRESSION_BENCH_FAKE_GPUS"


def fake_gpus() -> int:
    try:
        return max(0, int(os.environ.get(FAKE_GPUS_ENV, "0")))
    except ValueError:
        return 0


def gpu_devices() -> list[str]:
    """``cuda:0`` ... ``cuda:N-1``: the real ones, or the fake ones when asked for."""
    count = fake_gpus()
    if not count:
        import torch
        count = torch.cuda.device_count()
    return [f"cuda:{i}" for i in range(count)]


def compute_device(device: str) -> str:
    """What a queue device computes on: a fake GPU computes on the CPU."""
    return "cpu" if device.startswith("cuda") and fake_gpus() else device


def busy_lock_path(store_path: Path, device: str) -> Path:
    return store_path.with_name(f"{store_path.name}.busy-{device.replace(':', '-')}.lock")


def try_lock(path: Path) -> int | None:
    """An open, exclusively locked file (close the fd to release), or None if another process
    holds the lock."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def try_busy(store_path: Path, device: str) -> int | None:
    """The device's busy lock if it is free now, else None."""
    return try_lock(busy_lock_path(store_path, device))


@contextmanager
def busy(store_path: Path, device: str):
    """Hold the device's busy lock (waiting for it) for the duration."""
    fd = os.open(busy_lock_path(store_path, device), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
