"""A launched rank's lifeline: it dies with the process that launched it, however that one
dies (a SIGKILLed queue worker included), so no rank trains on alone.

Imported by the ranks before torch; nothing here imports more than the standard library."""

from __future__ import annotations

import errno
import os
import select
import signal
import sys
import threading


def die_with_launcher(launcher: int | None = None) -> None:
    """Linux: the kernel kills this rank if its parent dies (even by SIGKILL).

    Under the forkserver a rank's parent is the server, not the launcher, and the server
    outlives a SIGKILLed launcher for as long as a rank does: the ranks trained on alone, and
    the server stayed with them (issue 33.1's kill test). So a rank also watches the launcher
    itself (``launcher``: its pid, watched through a pidfd, readable once it has exited) and
    ends with it; the server then leaves too."""
    if sys.platform.startswith("linux"):
        import ctypes
        try:
            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if launcher is None or launcher == os.getppid() or not hasattr(os, "pidfd_open"):
        return
    try:
        watched = os.pidfd_open(launcher)
    except OSError as exc:
        if exc.errno == errno.ESRCH:  # gone before this rank started
            os.kill(os.getpid(), signal.SIGKILL)
        return  # no pidfds here (an old kernel): the parent's death signal alone

    def watch():
        select.select([watched], [], [])
        os.kill(os.getpid(), signal.SIGKILL)
    threading.Thread(target=watch, name="bench-ddp-launcher-watch", daemon=True).start()
