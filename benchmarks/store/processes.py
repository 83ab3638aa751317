"""Whether the process that writes a run is still the one alive under its pid: a pid with
the kernel's start time names a process uniquely."""

from __future__ import annotations

import os
from pathlib import Path


def process_start_token(pid: int) -> str | None:
    """The kernel's start time of a process: with the pid, it names the process uniquely
    (a pid alone may be reused by an unrelated process after a crash)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 22 (starttime) counted after the ')' that closes the command name.
    return stat.rsplit(")", 1)[1].split()[19]


def process_alive(pid: int, token: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if process_state(pid) in ("Z", "X"):
        # Killed but not yet reaped by its parent: kill(pid, 0) still succeeds on a zombie,
        # yet it will never finish its run.
        return False
    if token is None:
        return True
    return process_start_token(pid) == token


def process_state(pid: int) -> str | None:
    """The kernel's one-letter state (R, S, Z for a zombie...), or None if unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]
