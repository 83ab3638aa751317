"""Cancel inside a long step: a watcher thread that interrupts the worker's main thread.

Job code stops where it calls ``check_stop`` (``benchmarks.spec.cancel``); some single steps
run for many seconds with nowhere to check (``torch.onnx.export`` of a small CNN took 10 s
here, ``torch.export`` 3 s). Inside ``interruptible(wanted)`` a thread asks ``wanted()`` every
``WATCH_S``; once it says stop, it sends SIGUSR1 to the main thread, whose handler raises
``Cancelled`` at the next Python instruction (repeated every ``REPEAT_S``, as library code may
catch the first). The step then unwinds through its ``finally`` blocks and its caller removes
the partial files, as for any cancel.

Library code interrupted mid-way may leave module-level state behind (a patched setting, a
tracing mode), so a worker whose step was interrupted leaves once the job is recorded
(``Interruptible.fired``) and the supervisor starts a fresh one for the next job.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

from benchmarks.spec.cancel import Cancelled

WATCH_S = 0.1
REPEAT_S = 0.5
SIGNAL = signal.SIGUSR1


class Interruptible:
    """``with Interruptible(wanted) as guard:`` (see the module's docstring); outside the
    main thread (a test calling the worker in a thread) it only watches, never signals."""

    def __init__(self, wanted: Callable[[], bool]):
        self.wanted = wanted
        self.fired = False
        self._done = threading.Event()
        self._armed = threading.Event()
        self._thread: threading.Thread | None = None
        self._previous = None
        self._main = threading.main_thread().ident

    def _handler(self, signum, frame):
        # Never once the block is left: not in __exit__ (a signal checked as it is entered)
        # nor after it.
        if not self._armed.is_set() or self._done.is_set() or \
                (frame is not None and frame.f_code is Interruptible.__exit__.__code__):
            return
        self.fired = True
        raise Cancelled()

    def _watch(self) -> None:
        while not self._done.wait(WATCH_S):
            try:
                stop = self.wanted()
            except Exception:  # a busy store: ask again
                continue
            if stop:
                self._armed.set()
                while not self._done.is_set():
                    signal.pthread_kill(self._main, SIGNAL)
                    self._done.wait(REPEAT_S)
                return

    def __enter__(self) -> "Interruptible":
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(SIGNAL, self._handler)
            self._thread = threading.Thread(target=self._watch, name="bench-interrupt",
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        # Done first: a signal still on its way lands on a handler that does nothing (the
        # caller's own check_stop sees the cancel).
        self._done.set()
        self._armed.clear()
        if self._thread is not None:
            self._thread.join()
            signal.signal(SIGNAL, self._previous or signal.SIG_DFL)
