"""The job kinds the queue takes and its worker runs: each declared once, in a module of its
own beside this one (``sweep``, ``distributed``, ``export``, ``recommend``, ``sensitivity``),
by one ``register(JobKind(...))``.

A ``JobKind`` says its name, what it is (for ``compression-bench list`` and the docs), the
config its payload is read into (``payload``: a ``setting(...)`` config with ``from_dict`` /
``to_dict``, or None where the payload is a plain reference such as an export's run and
variant) and ``run(worker, job)``, which the worker calls with itself (its progress, stop
check, recorder and limits: ``benchmarks.service.worker``) and the claimed job. ``run``
reports through the worker: ``worker.record_run`` for a job that stores a run (its fate
follows the job's: interrupted, failed, cancelled), ``worker.finish`` for one that does not.
Cancel reaches it through ``worker.stopper(job)`` (``benchmarks.spec.cancel.check_stop``).

The queue (``JobQueue.submit``) takes only registered kinds; a job row of a kind this
process does not know (queued by an older or newer server) ends ``failed`` with one line
naming it and the kinds registered here, and the worker goes on to the next job.

More kinds, from modules outside the product (a plug-in, a test's toy kind), are named in
``COMPRESSION_BENCH_KIND_MODULES`` (comma-separated importable modules, each calling
``register``): every process reads it (the server, the CLI and the worker, which inherits
the server's environment), so a kind registered there reaches the queue, the worker, the
CLI and My jobs alike.

Import-light (no torch): the dashboard reads this through the queue; each kind imports its
engine inside ``run``.
"""

from __future__ import annotations

import importlib
import os
import threading
from dataclasses import dataclass
from typing import Callable

EXTRA_KINDS_ENV = "COMPRESSION_BENCH_KIND_MODULES"
# The product's own kinds, one module each (``benchmarks.service.kinds.NAME``).
BUILTIN = ("sweep", "distributed", "export", "recommend", "sensitivity", "lm")


@dataclass(frozen=True)
class JobKind:
    """One kind of job: declared once, found by name by the queue, the worker and the CLI."""

    name: str
    description: str
    run: Callable  # run(worker, job): runs the claimed job and ends it through the worker
    payload: type | None = None  # the config the payload is read into (from_dict/to_dict)
    # Anyone holding a run's link may ask for this kind on the run where the operator opens
    # it (COMPRESSION_BENCH_SHARED_EXPORTS): an export. Others are the run owner's only.
    shared_with_link: bool = False
    # The one line a person gets who asks for this kind on a run not theirs (None: the
    # queue's general line).
    not_yours: str | None = None

    def parse(self, payload: dict):
        """The payload as its config (validated by the config itself), or the payload as
        given where the kind has none."""
        return payload if self.payload is None else self.payload.from_dict(payload)


class UnknownKind(ValueError):
    """A job kind nobody registered in this process."""

    def __init__(self, name: str):
        self.kind = name
        super().__init__(f"job kind {name!r} is not registered here (queued by another "
                         f"version of the server?); the registered kinds: {', '.join(names())}")


_KINDS: dict[str, JobKind] = {}
_LOADED: set[str] = set()
_LOCK = threading.RLock()


def register(kind: JobKind) -> JobKind:
    """Add ``kind``; a second kind of the same name is refused (registering the same record
    again, a module imported twice, is not)."""
    if not kind.name or not kind.name.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"a job kind's name is letters, digits, '-' and '_'; got {kind.name!r}")
    with _LOCK:
        held = _KINDS.get(kind.name)
        if held is not None and held != kind:
            raise ValueError(f"job kind {kind.name!r} is registered already")
        _KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove a kind (a test's toy kind, after the test)."""
    with _LOCK:
        _KINDS.pop(name, None)


def _extra_modules() -> list[str]:
    return [m.strip() for m in os.environ.get(EXTRA_KINDS_ENV, "").split(",") if m.strip()]


def _load() -> None:
    """Import the built-in kinds' modules and those COMPRESSION_BENCH_KIND_MODULES names (once
    each; the variable is read every time, so one set later is honoured too)."""
    wanted = [f"{__name__}.{name}" for name in BUILTIN] + _extra_modules()
    with _LOCK:
        for module in wanted:
            if module not in _LOADED:
                try:
                    importlib.import_module(module)
                except ImportError as exc:
                    raise ValueError(f"{EXTRA_KINDS_ENV} names {module!r}, which cannot be "
                                     f"imported: {exc}") from None
                _LOADED.add(module)


def names() -> list[str]:
    """Every registered kind's name, sorted."""
    _load()
    return sorted(_KINDS)


def get(name: str) -> JobKind:
    """The kind called ``name``; UnknownKind (a ValueError, one line) if none is."""
    _load()
    kind = _KINDS.get(name)
    if kind is None:
        raise UnknownKind(name)
    return kind


def kinds() -> list[JobKind]:
    """Every registered kind, by name."""
    return [_KINDS[n] for n in names()]
