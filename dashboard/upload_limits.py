"""Caps on what uploads may make the server hold: an ASGI middleware in front of Streamlit's
upload endpoint (``PUT /_stcore/upload_file/{session_id}/{file_id}``).

Streamlit keeps every uploaded file in the server's memory (its ``MemoryUploadedFileManager``)
until the session ends or the browser deletes it, and caps only each file
(``server.maxUploadSize``): ten 199 MB uploads under one's own session id, no widget involved,
took the server from 250 MB to 2.2 GB. Here every upload is counted against two totals, what
the manager holds plus what is arriving now:

- per session, ``COMPRESSION_BENCH_SESSION_UPLOAD_MB``;
- for the whole server, ``COMPRESSION_BENCH_UPLOAD_MB``.

A request whose Content-Length would pass either is refused before its body is read; one with
no Content-Length, or a body longer than it says, is counted as it streams and cut off the
moment it passes (the handler is told the client went away, so nothing it read is kept). The
answer is 413 with one line naming the cap, sent at once; the connection stays open and the
server drops the rest of the body as it arrives (uvicorn discards a body whose answer is
sent), so memory stays flat and a client that sends its whole body before it reads the reply
still gets the 413 rather than a reset connection.

Uploads no widget claims (Streamlit's file uploader asks the manager for its files on the run
after the upload) are dropped ``COMPRESSION_BENCH_UNCLAIMED_UPLOAD_S`` (30) seconds after they
arrived, not when the session ends.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache

from dashboard.asgi import _refuse, header

UPLOAD_ROUTE = "/_stcore/upload_file/"
UNCLAIMED_ENV = "COMPRESSION_BENCH_UNCLAIMED_UPLOAD_S"
MIB = 2**20


def unclaimed_s() -> float:
    """Seconds an upload no widget asked for is kept (30 by default)."""
    try:
        return max(0.5, float(os.environ.get(UNCLAIMED_ENV) or 30.0))
    except ValueError:
        raise ValueError(f"{UNCLAIMED_ENV} must be a number of seconds; got "
                         f"{os.environ.get(UNCLAIMED_ENV)!r}") from None


@lru_cache(maxsize=1)
def caps() -> tuple[int, int]:
    """(per session, whole server) in bytes: the operator's limits, read once."""
    from benchmarks.spec.limits import Limits
    limits = Limits.from_env()
    return limits.session_upload_mb * MIB, limits.upload_mb * MIB


def manager():
    """Streamlit's uploaded-file manager (None before the runtime exists)."""
    try:
        from streamlit.runtime import Runtime
        return Runtime.instance().uploaded_file_mgr
    except Exception:
        return None


def held(mgr) -> tuple[dict[str, int], int]:
    """Bytes the manager holds: per session, and in all."""
    if mgr is None or not hasattr(mgr, "file_storage"):
        return {}, 0
    with mgr._lock:
        per = {sid: sum(len(f.data) for f in files.values())
               for sid, files in mgr.file_storage.items()}
    return per, sum(per.values())


@dataclass
class Ledger:
    """Bytes arriving now, per session and in all; when each upload landed, and which ones a
    widget has asked for."""
    arriving: dict[str, int] = field(default_factory=dict)
    landed: dict[tuple[str, str], float] = field(default_factory=dict)
    claimed: set[tuple[str, str]] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, session: str, n: int) -> None:
        with self.lock:
            self.arriving[session] = self.arriving.get(session, 0) + n
            if self.arriving[session] <= 0:
                del self.arriving[session]

    def refusal(self, session: str, more: int) -> str | None:
        """The one line that refuses ``more`` bytes for ``session``, or None."""
        per_cap, total_cap = caps()
        per_held, total_held = held(manager())
        with self.lock:
            mine = per_held.get(session, 0) + self.arriving.get(session, 0)
            everyone = total_held + sum(self.arriving.values())
        if mine + more > per_cap:
            return (f"upload refused: this session already holds {mine / MIB:.0f} MB of "
                    f"uploads, and this one would take it past {per_cap // MIB} MB, the most "
                    f"one session may hold (COMPRESSION_BENCH_SESSION_UPLOAD_MB); remove an "
                    f"uploaded file first")
        if everyone + more > total_cap:
            return (f"upload refused: the server already holds {everyone / MIB:.0f} MB of "
                    f"uploads, and this one would take it past {total_cap // MIB} MB "
                    f"(COMPRESSION_BENCH_UPLOAD_MB); try again when others' have been used")
        return None


LEDGER = Ledger()


def _route(scope) -> tuple[str, str] | None:
    """(session id, file id) of an upload request, or None."""
    path = scope.get("path") or ""
    at = path.find(UPLOAD_ROUTE)
    if at < 0:
        return None
    parts = path[at + len(UPLOAD_ROUTE):].strip("/").split("/")
    return (parts[0], parts[1]) if len(parts) == 2 and all(parts) else None


class UploadLimits:
    """The middleware: see the module's docstring."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        route = _route(scope) if scope["type"] == "http" else None
        if route is None or scope.get("method") != "PUT":
            return await self.app(scope, receive, send)
        _watch_claims()
        session, file_id = route
        declared = header(scope, b"content-length")
        try:
            declared_n = int(declared) if declared is not None else None
            if declared_n is not None and declared_n < 0:
                raise ValueError
        except ValueError:
            return await _refuse(scope, receive, send, 400, "invalid Content-Length header")
        reserved = declared_n or 0
        why = LEDGER.refusal(session, reserved)
        if why is not None:
            return await _refuse(scope, receive, send, 413, why, close=False)
        LEDGER.add(session, reserved)
        state = {"counted": 0, "refused": None, "answered": False}

        async def counted_receive():
            message = await receive()
            if message["type"] == "http.request" and state["refused"] is None:
                state["counted"] += len(message.get("body", b""))
                extra = state["counted"] - reserved - state.get("grown", 0)
                if extra > 0:  # no Content-Length, or a body longer than it said
                    state["refused"] = LEDGER.refusal(session, extra)
                    if state["refused"] is None:
                        LEDGER.add(session, extra)
                        state["grown"] = state.get("grown", 0) + extra
                    else:  # the handler sees the client go; nothing it read is kept
                        return {"type": "http.disconnect"}
            return message

        async def guarded_send(message):
            if state["refused"] is not None:
                return  # the handler's own answer to the "disconnect" is dropped
            if message["type"] == "http.response.start":
                state["answered"] = True
                state["status"] = message.get("status")
            await send(message)

        try:
            await self.app(scope, counted_receive, guarded_send)
        except Exception:
            if state["refused"] is None:
                raise
        finally:
            LEDGER.add(session, -(reserved + state.get("grown", 0)))
        if state["refused"] is not None:
            await _refuse(scope, receive, send, 413, state["refused"], close=False)
        elif state.get("status") == 204:
            with LEDGER.lock:
                LEDGER.landed[(session, file_id)] = time.monotonic()


_watching = threading.Lock()
_watched: list = []


def _watch_claims() -> None:
    """Record the files a widget asks the manager for (its claim), once per manager."""
    mgr = manager()
    if mgr is None or any(m is mgr for m in _watched):
        return
    with _watching:
        if any(m is mgr for m in _watched):
            return
        original = mgr.get_files

        def get_files(session_id, file_ids):
            with LEDGER.lock:
                LEDGER.claimed.update(key for f in file_ids
                                      if (key := (session_id, f)) in LEDGER.landed)
            return original(session_id, file_ids)
        mgr.get_files = get_files
        _watched.append(mgr)


def drop_unclaimed(now: float | None = None, after_s: float | None = None) -> int:
    """Remove uploads no widget claimed within ``after_s`` (``unclaimed_s()``) of landing;
    returns how many."""
    mgr = manager()
    now = time.monotonic() if now is None else now
    after_s = unclaimed_s() if after_s is None else after_s
    with LEDGER.lock:
        stale = [key for key, at in LEDGER.landed.items()
                 if now - at >= after_s and key not in LEDGER.claimed]
        for key in stale:
            del LEDGER.landed[key]
        # A claimed upload is the widget's from now on (the browser deletes it with the
        # widget, Streamlit with the session): forget it here.
        for key in [k for k in LEDGER.landed if k in LEDGER.claimed]:
            del LEDGER.landed[key]
            LEDGER.claimed.discard(key)
    for session, file_id in stale:
        if mgr is not None:
            mgr.remove_file(session_id=session, file_id=file_id)
    return len(stale)


async def drop_unclaimed_forever() -> None:
    """The server's sweeper (serve.py's lifespan runs it), a few times per grace period."""
    every_s = min(5.0, unclaimed_s() / 4)
    while True:
        await asyncio.sleep(every_s)
        try:
            drop_unclaimed()
        except Exception:  # never take the server down over housekeeping
            pass
