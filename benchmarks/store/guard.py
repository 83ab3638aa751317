"""What job code in the worker may not write in the results store: an authorizer every
connection the worker's process opens is born with (``guard_worker_connections``)."""

from __future__ import annotations

import sqlite3

# What job code in the worker must never change: who owns a run or a job, what a job asked
# for, and the schema (its triggers included). The triggers stop an UPDATE of an owner once
# set, from any connection (a CLI run, stored without one, may be handed to a dashboard
# session once: tools/perf_ui.py does); in the worker, every connection its process opens
# (the engine's and any a model file opens itself) also gets ``worker_authorizer``, which
# refuses these writes and the DDL that would drop the triggers.
# A job's id names its folder, which the server removes, and its device the worker the server
# starts: fixed once submitted, and no job is queued from inside the worker.
PROTECTED_COLUMNS = {("runs", "owner"), ("jobs", "owner"), ("jobs", "session"),
                     ("jobs", "client"), ("jobs", "payload"), ("jobs", "job_id"),
                     ("jobs", "device"), ("jobs", "folder")}
NO_INSERT = ("jobs",)
PROTECTED_ROWS = ("runs", "jobs", "sqlite_master", "sqlite_schema", "sqlite_temp_master",
                  "sqlite_temp_schema")
DENIED_ACTIONS = {getattr(sqlite3, name) for name in (
    "SQLITE_DROP_TRIGGER", "SQLITE_DROP_TEMP_TRIGGER", "SQLITE_DROP_TABLE",
    "SQLITE_DROP_TEMP_TABLE", "SQLITE_DROP_VIEW", "SQLITE_DROP_TEMP_VIEW", "SQLITE_DETACH")}


def worker_authorizer(action, arg1, arg2, _db, _source) -> int:
    """sqlite3's authorizer for the worker's connections (see PROTECTED_COLUMNS)."""
    if action in DENIED_ACTIONS:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_UPDATE and ((arg1, arg2) in PROTECTED_COLUMNS
                                            or arg1 in PROTECTED_ROWS[2:]):
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_DELETE and arg1 in PROTECTED_ROWS:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_INSERT and arg1 in NO_INSERT:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() == "writable_schema":
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


class GuardedConnection(sqlite3.Connection):
    """A connection that is born with ``worker_authorizer``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.set_authorizer(worker_authorizer)


def guard_worker_connections() -> None:
    """Every SQLite connection this process opens through ``sqlite3.connect`` from now on (the
    store's and any a model file opens itself) is a ``GuardedConnection``. The worker calls it
    before any job runs. Job code that reaches below sqlite3.connect, or a process of its own,
    is stopped by the triggers only (docs/team-server.md)."""
    import functools
    import sqlite3.dbapi2 as dbapi2
    plain = dbapi2.connect
    if getattr(plain, "guarded", False):
        return

    @functools.wraps(plain)
    def connect(*args, **kwargs):
        kwargs["factory"] = GuardedConnection
        return plain(*args, **kwargs)
    connect.guarded = True
    sqlite3.connect = dbapi2.connect = connect
