"""The results store: SQLite in WAL mode, one row per variant written as soon as it is measured.

Several processes may write at once (two CLI sweeps, the dashboard's worker): every write is
one short ``BEGIN IMMEDIATE`` transaction and waits on a busy timeout rather than failing.
A run whose process died is noticed by the next process that opens the store (its pid is
gone, or belongs to another process now) and marked ``interrupted``.

``store.record(...)`` starts a run and hands back its ``RunRecorder``
(``benchmarks.store.recorder``), the one run lifecycle. ``connect``/``transaction`` are the
public handles other tables in the same file (the job queue's) use.

A run may have an owner (the dashboard's signed-in user or browser session, as a digest,
never a session key): only its owner, or an admin, deletes it. The owner is signed: the
server, which alone holds the session secret, pre-assigns a job's run id and signs it with the
owner (``owner_tag``); the worker stores that tag beside the owner and a store opened with the
secret believes only an owner whose tag verifies (``verified_owner``). Job code runs inside the
worker, which may write the file, so it can rewrite an owner, but never sign one: a run whose
tag does not verify is nobody's (read-only for everyone). The file is created owner-only
(0600, its folder 0700): it holds every team member's results. Raw latency samples are stored
as base64 float32 arrays (float64 where a value is not float32-exact), not JSON text: a fast
model's thousands of samples took 200 KB per variant as text.
"""

from __future__ import annotations

import binascii
import json
import os
import socket
import sqlite3
import stat
import time
import uuid
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.report.results import VariantResult
from benchmarks.spec.atomic import DiskFull, disk_full_as_one_line, raise_if_disk_full
from benchmarks.spec.folders import check_user_path, exports_root, private_file, private_folder
from benchmarks.spec.nofollow import files_as
from benchmarks.store.guard import guard_worker_connections  # noqa: F401  (re-exported)
from benchmarks.store.packing import packed, unpacked
from benchmarks.store.processes import process_alive, process_start_token
from benchmarks.store.recorder import RunRecorder
from benchmarks.store.tags import (  # noqa: F401  (the queue's and the worker's names)
    MAC_HEX,
    job_tag,
    owner_tag,
    tagged_job,
    tagged_owner,
)

RUN_STATUSES = ("running", "complete", "failed", "interrupted")
BUSY_TIMEOUT_S = 60.0
UNREADABLE_KEPT = 100  # the unreadable rows' lines one store object remembers

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id      TEXT PRIMARY KEY,
    created_at  TEXT NOT NULL,
    finished_at TEXT,
    kind        TEXT NOT NULL DEFAULT 'sweep',
    model       TEXT NOT NULL,
    dataset     TEXT NOT NULL,
    device      TEXT,
    status      TEXT NOT NULL,
    error       TEXT,
    spec        TEXT NOT NULL,
    environment TEXT NOT NULL,
    host        TEXT NOT NULL,
    pid         INTEGER NOT NULL,
    pid_start   TEXT,
    owner       TEXT,
    recommendation TEXT,
    owner_tag   TEXT
);
CREATE TABLE IF NOT EXISTS variants (
    run_id     TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    position   INTEGER NOT NULL,
    name       TEXT NOT NULL,
    result     TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (run_id, position)
);
CREATE INDEX IF NOT EXISTS runs_created ON runs(created_at);
CREATE TRIGGER IF NOT EXISTS runs_owner_is_fixed BEFORE UPDATE OF owner ON runs
WHEN OLD.owner IS NOT NULL AND NEW.owner IS NOT OLD.owner
BEGIN SELECT RAISE(ABORT, 'a run''s owner is set when it starts and never changed'); END;
CREATE TABLE IF NOT EXISTS device_peaks (
    host        TEXT NOT NULL,
    device      TEXT NOT NULL,
    device_name TEXT NOT NULL,
    torch       TEXT NOT NULL,
    threads     INTEGER NOT NULL,
    peaks       TEXT NOT NULL,
    measured_at TEXT NOT NULL,
    PRIMARY KEY (host, device, device_name, torch, threads)
);
"""
# What a device's measured peaks are cached under (benchmarks.measure.peaks.peaks_key).
PEAKS_KEY = ("host", "device", "device_name", "torch", "threads")
# Columns added after the first release: a store created before them gains them on open.
RUN_COLUMNS = {"owner": "TEXT", "recommendation": "TEXT", "owner_tag": "TEXT"}


# Per store file: the lines of the rows this process read and left out as unreadable.
_UNREADABLE: dict[str, dict[str, None]] = {}


def unreadable_lines(clear: bool = False) -> list[str]:
    """Every unreadable row this process has met, as "store PATH: run X: stored row N
    (NAME) unreadable, skipped (why)" (the CLI prints them when a command ends, ``clear``
    then: the next command in the same process says only its own)."""
    found = [f"store {path}: {line}" for path, lines in _UNREADABLE.items() for line in lines]
    if clear:
        for lines in _UNREADABLE.values():
            lines.clear()
    return found


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:8]


def default_store_path() -> Path:
    """Per user: $COMPRESSION_BENCH_STORE, else under $XDG_DATA_HOME (~/.local/share)."""
    env = os.environ.get("COMPRESSION_BENCH_STORE")
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "compression-bench" / "results.db"


def add_missing_columns(db, table: str, columns: dict[str, str]) -> None:
    """ALTER TABLE for the columns a store made by an older version lacks."""
    have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
    for name, decl in columns.items():
        if name not in have:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {decl}")


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def use_wal(db: sqlite3.Connection) -> None:
    """Switch a connection's file to WAL mode (a no-op once it is: the mode is persistent).

    The switch needs the file to itself, and SQLite answers "database is locked" at once
    rather than calling the busy handler, so processes opening a fresh store together
    (five browser sessions submitting at once) retry here, within the busy timeout.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


class ResultsStore:
    def __init__(self, path: str | os.PathLike | None = None, secret: bytes | None = None,
                 open_as: tuple[int, int] | None = None):
        self.path = Path(path) if path is not None else default_store_path()
        # The server's session secret: with it, only a signed owner is an owner (the
        # dashboard's store); without it (the CLI, the worker) owners are read as stored.
        self.secret = secret
        # (uid, gid) of the worker's own user, on a root server whose worker runs as one: the
        # store's files are that user's, and this process opens them with its rights
        # (``_opener``).
        self.open_as = open_as
        # The lines of rows read and left out as unreadable (``_variants``), oldest first;
        # shared by every store object of this file in the process (``unreadable_lines``).
        self.unreadable = _UNREADABLE.setdefault(str(self.path), {})
        # Before the first stat: a 300-byte name is one line, not ENAMETOOLONG's traceback; a
        # folder it may not write is SQLite's to refuse (an existing store is read in place).
        check_user_path(self.path, "--store", parent_must_exist=False, writable=False)
        if self.path.exists() and self.path.is_dir():
            raise ValueError(f"store {self.path} is a directory; give a file path for --store")
        created = not self.path.exists()
        try:
            private_folder(self.path.parent)
            # SQLite gives its -wal and -shm files the database file's mode.
            private_file(self.path)
        except OSError as exc:
            raise_if_disk_full(exc, self.path.parent, self.path.name)
            raise ValueError(f"store {self.path}: cannot create it ({exc.strerror})")
        try:
            with self.connect() as db:
                db.executescript(SCHEMA)
                add_missing_columns(db, "runs", RUN_COLUMNS)
        except (sqlite3.DatabaseError, DiskFull) as exc:
            if created:  # a store that could not be made leaves no empty file behind
                self._remove_files()
            raise_if_disk_full(exc, self.path.parent, self.path.name)
            raise ValueError(f"store {self.path} is not a usable SQLite database ({exc})")
        self.mark_dead_runs()

    def _remove_files(self) -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    # -- plumbing ------------------------------------------------------------------------

    def _opener(self) -> tuple[int | None, int | None]:
        """Whose rights this process opens the store's files with: the worker's
        (``open_as``) once the store's folder is that user's to write, unless the store's
        file is still this process's own (a regular file, no link). The worker's user may
        swap the file it owns for a link to any file; SQLite follows a link to the database
        (it refuses one in place of its -wal and -shm), and as root would read or initialise
        whatever it leads to."""
        if self.open_as is None or os.geteuid() != 0:
            return None, None
        uid, gid = self.open_as
        try:
            folder = os.stat(self.path.parent)
            if folder.st_gid != gid and folder.st_uid != uid:
                return None, None  # not yet handed to the worker: nothing of its is in there
            info = os.lstat(self.path)
            if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid():
                return None, None
        except FileNotFoundError:
            pass
        return uid, gid

    @contextmanager
    def connect(self):
        """A read connection (autocommit); writes go through ``transaction``. On a full file
        system SQLite answers even a read with "disk I/O error" (WAL's shared-memory file
        cannot grow): that is ``DiskFull``, one line naming the store's folder and its free
        space (``atomic.raise_if_disk_full``)."""
        try:
            with self._connected() as db:
                yield db
        except sqlite3.Error as exc:
            raise_if_disk_full(exc, self.path.parent)
            raise

    @contextmanager
    def _connected(self):
        # The whole connection, not just its opening: SQLite opens the -wal and -shm files
        # at its first statement.
        with files_as(*self._opener()):
            db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            try:
                use_wal(db)
                db.execute("PRAGMA foreign_keys=ON")
                # NORMAL is durable in WAL mode against process crashes (a SIGKILL loses
                # nothing committed); only an OS crash could lose the last transactions.
                db.execute("PRAGMA synchronous=NORMAL")
                db.row_factory = sqlite3.Row
                yield db
            finally:
                db.close()

    @contextmanager
    def transaction(self):
        """One write transaction; a full disk raises ``DiskFull`` naming the store's folder
        (SQLite rolls the transaction back)."""
        with disk_full_as_one_line(self.path.parent, self.path.name), self.connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    # -- runs ----------------------------------------------------------------------------

    def start_run(self, *, model: str, dataset: str, device: str | None, spec: dict,
                  environment: dict, kind: str = "sweep", pid: int | None = None,
                  owner: str | None = None, run_id: str | None = None,
                  owner_tag: str | None = None) -> str:
        """A new run; a job's ``run_id`` and ``owner_tag`` are the server's, made at submit."""
        run_id = run_id or new_run_id()
        pid = os.getpid() if pid is None else pid
        with self.transaction() as db:
            db.execute(
                "INSERT INTO runs (run_id, created_at, kind, model, dataset, device, status, "
                "spec, environment, host, pid, pid_start, owner, owner_tag) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (run_id, now_iso(), kind, model, dataset, device, "running",
                 json.dumps(spec, default=str), json.dumps(environment, default=str),
                 socket.gethostname(), pid, process_start_token(pid), owner, owner_tag))
        return run_id

    def verified_owner(self, row) -> str | None:
        """A stored run's owner (``row`` holds run_id, owner, owner_tag): as stored without
        the secret; with it, the one its server-signed tag names, else nobody (a CLI run, an
        older row, a rewritten tag)."""
        if self.secret is None:
            return row["owner"]
        return tagged_owner(self.secret, row["run_id"], row["owner_tag"])

    def sign_owner(self, run_id: str, owner: str) -> None:
        """Give an unowned run (a CLI run) to ``owner``, signed: the server's own act (it
        needs the secret); the trigger refuses a run that has an owner already."""
        if self.secret is None:
            raise ValueError("signing a run's owner needs the server's secret")
        with self.transaction() as db:
            db.execute("UPDATE runs SET owner=?, owner_tag=? WHERE run_id=?",
                       (owner, owner_tag(self.secret, run_id, owner), run_id))

    def add_variant(self, run_id: str, result: VariantResult | dict,
                    position: int | None = None) -> int:
        """Store a variant at ``position`` (replacing what was there: a variant measured in
        two passes is stored after each), or after the last one. Returns its position."""
        data = result.to_dict() if isinstance(result, VariantResult) else result
        with self.transaction() as db:
            if position is None:
                (position,) = db.execute("SELECT COUNT(*) FROM variants WHERE run_id=?",
                                         (run_id,)).fetchone()
            db.execute("INSERT OR REPLACE INTO variants (run_id, position, name, result, "
                       "created_at) VALUES (?,?,?,?,?)",
                       (run_id, position, data["name"], json.dumps(packed(data), default=str),
                        now_iso()))
        return position

    def record(self, *, model: str, dataset: str, device: str | None, spec: dict,
               environment: dict, kind: str = "sweep", owner: str | None = None,
               run_id: str | None = None, owner_tag: str | None = None) -> RunRecorder:
        """Start a run and return its recorder (a context manager)."""
        return RunRecorder(self, self.start_run(model=model, dataset=dataset, device=device,
                                                spec=spec, environment=environment,
                                                kind=kind, owner=owner, run_id=run_id,
                                                owner_tag=owner_tag))

    def finish_run(self, run_id: str, status: str, error: str | None = None) -> None:
        if status not in RUN_STATUSES:
            raise ValueError(f"status must be one of {', '.join(RUN_STATUSES)}; got {status!r}")
        with self.transaction() as db:
            db.execute("UPDATE runs SET status=?, error=?, finished_at=? WHERE run_id=?",
                       (status, error, now_iso(), run_id))

    def set_environment(self, run_id: str, environment: dict) -> None:
        """A run's environment card, when it is known only once the run has started (the
        node a cluster measured it on)."""
        with self.transaction() as db:
            db.execute("UPDATE runs SET environment=? WHERE run_id=?",
                       (json.dumps(environment, default=str), run_id))

    def set_recommendation(self, run_id: str, recommendation: dict,
                           spec: dict | None = None) -> None:
        """A recommendation's search and certificate (``benchmarks.recommend``), and the
        run's spec grown to every variant it stored, so each exports like a sweep's."""
        with self.transaction() as db:
            db.execute("UPDATE runs SET recommendation=? WHERE run_id=?",
                       (json.dumps(recommendation, default=str), run_id))
            if spec is not None:
                db.execute("UPDATE runs SET spec=? WHERE run_id=?",
                           (json.dumps(spec, default=str), run_id))

    def mark_dead_runs(self) -> int:
        """Mark runs of this host whose process is gone as interrupted. Returns how many."""
        host = socket.gethostname()
        with self.connect() as db:
            rows = db.execute("SELECT run_id, pid, pid_start FROM runs "
                              "WHERE status='running' AND host=?", (host,)).fetchall()
        dead = [r["run_id"] for r in rows if not process_alive(r["pid"], r["pid_start"])]
        if dead:
            with self.transaction() as db:
                db.executemany(
                    "UPDATE runs SET status='interrupted', finished_at=?, "
                    "error=COALESCE(error, 'its process ended before the run finished') "
                    "WHERE run_id=? AND status='running'", [(now_iso(), d) for d in dead])
        return len(dead)

    def delete_run(self, run_id: str, *, by: str | None = None, admin: bool = False) -> bool:
        """Delete a run, and the dashboard's exports of it; with ``by``, only if ``by`` owns it
        (or ``admin``): PermissionError otherwise."""
        with self.transaction() as db:
            row = db.execute("SELECT run_id, owner, owner_tag FROM runs WHERE run_id=?",
                             (run_id,)).fetchone()
            if row is None:
                return False
            if by is not None and not admin and self.verified_owner(row) != by:
                raise PermissionError("only the person who ran it can delete this run")
            db.execute("DELETE FROM variants WHERE run_id=?", (run_id,))
            cur = db.execute("DELETE FROM runs WHERE run_id=?", (run_id,))
        self._remove_exports(run_id)
        return cur.rowcount > 0

    def _remove_exports(self, run_id: str) -> None:
        from benchmarks.spec.nofollow import remove_folder
        root = exports_root(self.path)
        folder = root / run_id
        # Only a plain name below exports/ (a run id never holds a separator), reached
        # without following a link: the worker's user owns exports/ and may swap it.
        if folder.parent == root and run_id not in ("", ".", ".."):
            remove_folder(folder, self.path.parent)

    def _skipped(self, line: str) -> None:
        """Remember an unreadable row's line (the CLI prints them naming the store), at most
        UNREADABLE_KEPT of them: the dashboard's one store object lives as long as the
        server."""
        self.unreadable.pop(line, None)
        self.unreadable[line] = None
        while len(self.unreadable) > UNREADABLE_KEPT:
            self.unreadable.pop(next(iter(self.unreadable)))

    def _column(self, row, name: str, lines: list[str], empty):
        """A run's JSON column decoded, or ``empty`` with one line where it is unreadable."""
        text = row[name]
        if not text:
            return empty
        try:
            value = json.loads(text)
        except (ValueError, TypeError) as exc:
            line = f"run {row['run_id']}: stored {name} unreadable, skipped ({exc})"
            lines.append(line)
            self._skipped(line)
            return empty
        return value

    def _variants(self, db, run_id: str, lines: list[str]) -> list[dict]:
        """The run's variants in order; a row that does not decode (truncated JSON, not a
        variant) is left out with one line naming the run and the row, so one bad row never
        takes the page or the command down with it."""
        variants = []
        for v in db.execute("SELECT position, name, result FROM variants WHERE run_id=? "
                            "ORDER BY position", (run_id,)):
            try:
                data = json.loads(v["result"])
                if not isinstance(data, dict) or not isinstance(data.get("name"), str):
                    raise ValueError("not a variant's result")
                variants.append(unpacked(data))
            except (ValueError, TypeError, KeyError, binascii.Error) as exc:
                line = (f"run {run_id}: stored row {v['position']} ({v['name']}) unreadable, "
                        f"skipped ({str(exc)[:120]})")
                lines.append(line)
                self._skipped(line)
        return variants

    def _run_dict(self, db, row, with_variants: bool = True) -> dict:
        unreadable: list[str] = []
        if with_variants:
            variants = self._variants(db, row["run_id"], unreadable)
            count = len(variants)
        else:  # a summary: lists of runs stay fast as the store grows
            variants = None
            (count,) = db.execute("SELECT COUNT(*) FROM variants WHERE run_id=?",
                                  (row["run_id"],)).fetchone()
        return {
            "variant_count": count,
            "run_id": row["run_id"], "created_at": row["created_at"],
            "finished_at": row["finished_at"], "kind": row["kind"], "model": row["model"],
            "dataset": row["dataset"], "device": row["device"], "status": row["status"],
            "error": row["error"], "spec": self._column(row, "spec", unreadable, {}),
            "environment": self._column(row, "environment", unreadable, {}),
            "variants": variants,
            # With the secret, an owner whose signature does not verify is nobody: the run
            # is read-only for everyone, and says so ("ownership unverifiable").
            "owner": self.verified_owner(row),
            "owner_unverified": (row["owner"] is not None or row["owner_tag"] is not None)
            and self.verified_owner(row) is None,
            "recommendation": self._column(row, "recommendation", unreadable, None),
            # One line per row of this run that could not be read (and was left out).
            "unreadable": unreadable,
        }

    def runs(self, limit: int | None = None, kind: str | None = None,
             with_variants: bool = True, model: str | None = None,
             dataset: str | None = None, owner: str | None = None) -> list[dict]:
        """Past runs, newest first, each with its variants (or only their count); optionally
        only those of one kind, model, data set or owner."""
        where, args = [], []
        # With the secret, an owner's runs are those whose tag names them (the owner column
        # may have been rewritten), checked below.
        checked = owner is not None and self.secret is not None
        for column, value in (("kind", kind), ("model", model), ("dataset", dataset),
                              ("owner", owner)):
            if value is not None:
                where.append(f"substr(owner_tag, {MAC_HEX + 2})=?" if checked and
                             column == "owner" else f"{column}=?")
                args.append(value)
        sql = "SELECT * FROM runs" + (" WHERE " + " AND ".join(where) if where else "")
        sql += " ORDER BY created_at DESC, rowid DESC"
        # The limit counts only the runs whose tag verifies.
        if limit is not None and not checked:
            sql += " LIMIT ?"
            args.append(int(limit))
        with self.connect() as db:
            rows = db.execute(sql, args).fetchall()
            if checked:
                rows = [r for r in rows if self.verified_owner(r) == owner]
                rows = rows if limit is None else rows[:int(limit)]
            return [self._run_dict(db, r, with_variants) for r in rows]

    def run(self, run_id: str) -> dict | None:
        with self.connect() as db:
            row = db.execute("SELECT * FROM runs WHERE run_id=?", (run_id,)).fetchone()
            return None if row is None else self._run_dict(db, row)

    def finished_mark(self) -> tuple[int, str | None]:
        """(runs finished, the latest finish): a cheap key that changes whenever a run ends,
        for a page's cache of earlier runs (an estimate drawn after a run must see it)."""
        with self.connect() as db:
            count, latest = db.execute("SELECT COUNT(finished_at), MAX(finished_at) FROM runs"
                                       ).fetchone()
        return int(count), latest

    def variant_count(self, run_id: str) -> int:
        """How many variants the run has stored (what a polling page needs, without decoding
        them)."""
        with self.connect() as db:
            (count,) = db.execute("SELECT COUNT(*) FROM variants WHERE run_id=?",
                                  (run_id,)).fetchone()
        return count

    def variant_results(self, run_id: str) -> list[VariantResult]:
        run = self.run(run_id)
        return [] if run is None else [VariantResult.from_dict(v) for v in run["variants"]]

    # -- device peaks (the roofline's roofs), measured once per machine ----------------------

    def device_peaks(self, key: dict) -> dict | None:
        """The peaks stored under ``key`` (host, device, device_name, torch, threads)."""
        with self.connect() as db:
            row = db.execute("SELECT peaks FROM device_peaks WHERE " +
                             " AND ".join(f"{k}=?" for k in PEAKS_KEY),
                             [key[k] for k in PEAKS_KEY]).fetchone()
        return None if row is None else json.loads(row["peaks"])

    def save_device_peaks(self, key: dict, peaks: dict) -> None:
        with self.transaction() as db:
            db.execute(f"INSERT OR REPLACE INTO device_peaks ({', '.join(PEAKS_KEY)}, peaks, "
                       f"measured_at) VALUES ({', '.join('?' * (len(PEAKS_KEY) + 2))})",
                       [*(key[k] for k in PEAKS_KEY), json.dumps(peaks), now_iso()])

    def integrity_ok(self) -> bool:
        with self.connect() as db:
            return db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
