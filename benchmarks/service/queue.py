"""The job queue the dashboard submits to: one worker process per device.

Jobs live in the results store's SQLite file, so they survive a server restart and every page
(every session) sees every job's state. One worker per device (``benchmarks.service.worker``)
holds an exclusive ``flock`` on a lock file in the server's own folder, taken for it by the
server that starts it, which records the worker behind it: "is a worker alive?" is that lock
held and that process alive (a lock kept by what a dead worker's job left is ended with it,
``workers.py``), and two sessions that both start a worker end up with one. The next worker
marks the jobs a dead one left running as interrupted; the queue's supervisor
(``benchmarks.service.supervisor``) notices sooner, with the cause.

Files a job needs (an uploaded checkpoint) are moved out of the browser session's folder at
submission and removed when the job ends, so a closed browser session never breaks a queued
job. Where the worker runs as a user of its own they wait in the server's folder, the
server's alone, until a worker claims the job, and only then become the worker's (the job's
own folder, ``STORE.jobs/JOB_ID``): job code never reads another person's queued upload. A
job's folder is named by its id, never by what a row says. Jobs carry an
owner (signed-in user, else the browser session, as a digest): only the owner or an admin
cancels them, and the operator caps how many one owner may have queued or running. Owners are
signed by the server at submission (it holds the session secret; the worker, whose job code may
rewrite the store, never does): the job's owner and session (``job_tag``), and the run id the
job will create with its owner (``owner_tag``, copied by the worker into the run). A queue made
with the secret (the dashboard's) believes only owners whose signature verifies.

Import-light on purpose (no torch): the dashboard imports this module; only the worker loads
the engine.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.service import kinds
from benchmarks.service.supervisor import holder_alive
from benchmarks.service.workers import WorkerProcesses
from benchmarks.spec.folders import own_folder, server_folder
from benchmarks.spec.nofollow import Refused, remove_folder, tree_bytes
from benchmarks.spec.limits import Limits
from benchmarks.store.database import (
    ResultsStore,
    add_missing_columns,
    default_store_path,
    job_tag,
    new_run_id,
    now_iso,
    owner_tag,
    tagged_job,
)
from optimizers.errors import first_line

JOB_STATUSES = ("queued", "running", "complete", "failed", "cancelled", "interrupted")
FINISHED = ("complete", "failed", "cancelled", "interrupted")
POLL_S = 0.25            # how often an idle worker looks for work
PROGRESS_EVERY_S = 0.2   # progress writes are throttled; a phase change is always written

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id        TEXT UNIQUE NOT NULL,
    kind          TEXT NOT NULL,
    status        TEXT NOT NULL,
    session       TEXT NOT NULL,
    device        TEXT NOT NULL,
    payload       TEXT NOT NULL,
    submitted_at  TEXT NOT NULL,
    started_at    TEXT,
    finished_at   TEXT,
    run_id        TEXT,
    progress      TEXT NOT NULL DEFAULT '{}',
    error         TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    worker_pid    INTEGER,
    worker_token  TEXT,
    owner         TEXT,
    time_limit_s  REAL,
    folder        TEXT,
    client        TEXT,
    new_run_id    TEXT,
    run_tag       TEXT,
    owner_tag     TEXT
);
CREATE INDEX IF NOT EXISTS jobs_queue ON jobs(device, status, seq);
CREATE TRIGGER IF NOT EXISTS jobs_owner_is_fixed BEFORE UPDATE OF owner, session ON jobs
WHEN NEW.owner IS NOT OLD.owner OR NEW.session IS NOT OLD.session
BEGIN SELECT RAISE(ABORT, 'a job''s owner is set when it is submitted and never changed'); END;
CREATE TABLE IF NOT EXISTS workers (
    device      TEXT PRIMARY KEY,
    pid         INTEGER NOT NULL,
    started_at  TEXT NOT NULL,
    card        TEXT NOT NULL
);
"""
# Once every column exists (an older store gains them first): a job's id names its folder and
# its device its worker, so neither changes after submission.
TRIGGERS = """
CREATE TRIGGER IF NOT EXISTS jobs_identity_is_fixed BEFORE UPDATE OF job_id, device, folder
ON jobs WHEN NEW.job_id IS NOT OLD.job_id OR NEW.device IS NOT OLD.device
OR NEW.folder IS NOT OLD.folder
BEGIN SELECT RAISE(ABORT, 'a job''s id, device and folder are set when it is submitted'); END;
"""
JOB_COLUMNS = {"worker_token": "TEXT", "owner": "TEXT", "time_limit_s": "REAL",
               "folder": "TEXT", "client": "TEXT", "new_run_id": "TEXT", "run_tag": "TEXT",
               "owner_tag": "TEXT"}
ACTIVE_SQL = "status IN ('queued', 'running')"
ANONYMOUS = "session:"  # the owners of sessions without sign-in (dashboard.identity)
JOB_ID = re.compile(r"[0-9a-f]{12}")  # what ``submit`` makes: a job's folder is named by it
# How long a worker waits, once it has claimed a job, for the server to hand it the job's
# uploaded files (the supervisor looks every WATCH_S).
HAND_OVER_S = 30.0


class CapReached(ValueError):
    """A cap on queued and running jobs: ``cap`` is which (person, address or server)."""

    def __init__(self, cap: str, message: str):
        super().__init__(message)
        self.cap = cap


@dataclass
class Job:
    job_id: str
    kind: str
    status: str
    session: str
    device: str
    payload: dict
    submitted_at: str
    started_at: str | None = None
    finished_at: str | None = None
    run_id: str | None = None
    progress: dict = field(default_factory=dict)
    error: str | None = None
    cancel_requested: bool = False
    position: int | None = None  # 0 running now; n >= 1 the n-th in its device's queue
    owner: str | None = None
    time_limit_s: float | None = None
    folder: str | None = None    # the job's own files (an uploaded checkpoint), removed at its end
    worker_pid: int | None = None
    # The run this job creates, pre-assigned and signed by the server at submission (the
    # worker stores both with the run); None for a job queued before they existed.
    new_run_id: str | None = None
    run_tag: str | None = None
    # Why the stored payload is unusable (not JSON, not an object): the worker fails the
    # job with it; lists of jobs still read (``payload`` is then empty).
    payload_error: str | None = None

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


# How often an idle worker driving a Ray cluster refreshes the sidebar's view of it.
CLUSTER_REFRESH_S = 10.0
RAY_ADDRESS_ENV = "COMPRESSION_BENCH_RAY_ADDRESS"


def ray_address() -> str | None:
    """The cluster the dashboard's worker drives, if the operator gave one."""
    return os.environ.get(RAY_ADDRESS_ENV) or None


def decoded_payload(text) -> tuple[dict, str | None]:
    """(payload, None) for a stored payload that is a JSON object; ({}, why) otherwise: the
    server writes only objects, so anything else was written around it, and is refused in
    one line rather than read."""
    try:
        payload = json.loads(text)
    except (TypeError, ValueError) as exc:
        return {}, (f"the job's payload is not JSON ({first_line(exc, 120)}); queue the job "
                    f"again")
    if not isinstance(payload, dict):
        return {}, (f"the job's payload is a JSON {type(payload).__name__}, not an object; "
                    f"queue the job again")
    return payload, None


# The keys under which a payload names a stored run: an export's ``run_id``, a map's
# ``source_run``, a schedule's ``map_run``, and any later ``..._run``/``..._run_id``.
RUN_KEY_SUFFIXES = ("_run", "_run_id")


def runs_named(payload) -> list[str]:
    """Every stored run a payload names, however deep and under whatever run key: the one
    owner check of ``JobQueue.submit`` sees them all. A schedule travels inside a variant's
    settings as JSON text, so text that is a JSON object is read too."""
    found: list[str] = []

    def walk(value, depth: int) -> None:
        if depth > 32:  # a payload is a few levels deep; nothing legitimate nests further
            raise ValueError("a job's payload nests deeper than 32 levels")
        if isinstance(value, dict):
            for key, item in value.items():
                if (key == "run_id" or str(key).endswith(RUN_KEY_SUFFIXES)) and \
                        isinstance(item, (str, int)) and not isinstance(item, bool):
                    found.append(str(item))
                else:
                    walk(item, depth + 1)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item, depth + 1)
        elif isinstance(value, str) and value.lstrip().startswith("{"):
            try:
                walk(json.loads(value), depth + 1)
            except ValueError:
                pass
    walk(payload, 0)
    return list(dict.fromkeys(found))


class JobQueue(WorkerProcesses):
    def __init__(self, store_path: str | os.PathLike | None = None,
                 limits: Limits | None = None, secret: bytes | None = None,
                 serving: bool = True):
        # ``secret``: the server's session secret (the dashboard's queue); with it, owners are
        # signed at submission and believed only where the signature verifies. ``serving``
        # False: the worker's own queue, which never touches the server's folder.
        self.secret = secret
        # A root server whose worker runs as a user of its own opens the store with that
        # user's rights (ResultsStore._opener); one not created yet has never had it.
        known = None
        if serving and os.geteuid() == 0:
            from benchmarks.service.account import worker_account
            try:
                known = worker_account(create=False)
            except ValueError:
                pass
        self.store = ResultsStore(store_path, secret,  # creates the file and the tables
                                  open_as=None if known is None else (known.uid, known.gid))
        self.path = self.store.path
        self.limits = limits if limits is not None else Limits.from_env()
        self.jobs_dir = self.path.with_name(f"{self.path.name}.jobs")
        # Uploads of queued jobs, where the worker is another user: the server's alone.
        self.held_dir = server_folder(self.path) / "uploads"
        if serving:
            own_folder(server_folder(self.path))
        with self.store.connect() as db:
            db.executescript(SCHEMA)
        with self.store.transaction() as db:
            add_missing_columns(db, "jobs", JOB_COLUMNS)
        with self.store.connect() as db:
            db.executescript(TRIGGERS)
        self._spawned: list[subprocess.Popen] = []
        self._exits: dict[int, int] = {}  # pid -> return code of reaped workers
        self._lock = threading.RLock()
        self._supervisor = None  # a Supervisor once started (WorkerProcesses.supervise)
        self._account: tuple | None = None  # (Account or None,) once resolved
        # The memory limit that counts everything (benchmarks.service.memory_guard): the
        # workers in a cgroup of their own (pid -> (cgroup, its OOM kills at the start)), and
        # why the watchdog killed one (pid -> (job status, reason)).
        self._cgroups: dict[int, tuple[Path, int]] = {}
        self._causes: dict[int, tuple[str, str]] = {}
        self._guard = None

    @classmethod
    def shared(cls, store_path: str | os.PathLike | None = None,
               secret: bytes | None = None) -> "JobQueue":
        """This process's one queue over a store, supervising: the workers it starts are its
        children, so it alone can reap them and tell how they died. The dashboard's server
        takes it at start-up (serve.py) and in its pages."""
        path = Path(store_path) if store_path is not None else None
        with _SHARED_LOCK:
            key = str((path or default_store_path()).resolve())
            queue = _SHARED.get(key)
            if queue is None:
                queue = _SHARED[key] = cls(path)
            if secret is not None and queue.secret is None:  # serve.py's, taken first
                queue.secret = queue.store.secret = secret
        queue.supervise()
        return queue

    # -- submitting and reading ----------------------------------------------------------

    def submit(self, kind: str, payload: dict, *, session: str, device: str = "cpu",
               owner: str | None = None, attachments: dict[str, str] | None = None,
               client: str | None = None, admin: bool = False) -> str:
        """Queue a job. ``attachments`` maps payload fields to files (an uploaded checkpoint)
        that are moved into the job's own folder; the payload then names them there.
        ``client`` is where the request came from (a digest of the address), counted
        against the per-address cap for owners without sign-in. A job on a stored run
        (any run its payload names, under any key: an export's ``run_id``, a map's
        ``source_run``, a schedule's ``map_run``; ``runs_named``) is that run's owner's to
        ask for, or an admin's (an export also anyone's where the operator shares exports):
        PermissionError otherwise, in one line."""
        job_kind = kinds.get(kind)  # ValueError in one line: the kind and those registered
        owner = owner or session
        for run_id in runs_named(payload):
            self._check_run_owner(run_id, owner, admin, job_kind)
        with self.store.connect() as db:
            self._check_cap(db, owner, client)
        job_id = uuid.uuid4().hex[:12]
        run_id, run_tag, tag = new_run_id(), None, None
        if self.secret is not None:
            run_tag = owner_tag(self.secret, run_id, owner)
            tag = job_tag(self.secret, job_id, owner, session)
        payload, folder = dict(payload), None
        if attachments:
            folder = self.job_folder(job_id)
            # Where the worker is another user, the files wait in the server's folder until
            # a worker claims the job (``hand_over``); else they go to the job's folder now.
            held = self.held_dir / job_id if self.worker_account() is not None else folder
            own_folder(held)
            for key, source in attachments.items():
                target = held / Path(source).name
                shutil.move(source, target)
                os.chmod(target, 0o600)  # the upload is its owner's (then the worker's) only
                payload[key] = str(folder / target.name)
        try:
            with self.store.transaction() as db:
                self._check_cap(db, owner, client)
                db.execute("INSERT INTO jobs (job_id, kind, status, session, device, payload, "
                           "submitted_at, owner, time_limit_s, folder, client, new_run_id, "
                           "run_tag, owner_tag) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                           (job_id, kind, "queued", session, device, json.dumps(payload),
                            now_iso(), owner, self.limits.job_time_s,
                            None if folder is None else str(folder), client, run_id,
                            run_tag, tag))
        except BaseException:
            if folder is not None:
                self._remove_folder(job_id)
            raise
        return job_id

    def _check_run_owner(self, run_id: str, owner: str, admin: bool,
                         kind: kinds.JobKind) -> None:
        """A job that runs on a stored run (an export hands out its weights, a map or a
        schedule's sweep runs its owner's model and data) is for the run's owner; others
        read the run (its link) but do not run anything on it, except a kind the operator
        opens to a link (``JobKind.shared_with_link``: an export, with
        COMPRESSION_BENCH_SHARED_EXPORTS)."""
        if admin or (kind.shared_with_link and self.limits.shared_exports):
            return
        with self.store.connect() as db:
            row = db.execute("SELECT run_id, owner, owner_tag FROM runs WHERE run_id=?",
                             (run_id,)).fetchone()
        if row is None:
            raise ValueError(f"run {run_id!r} is not in the store")
        if self.store.verified_owner(row) == owner:
            return
        raise PermissionError(kind.not_yours or f"only the person who ran it can queue a "
                              f"{kind.name} job on run {run_id} (a shared link is read-only)")

    def _check_cap(self, db, owner: str, client: str | None) -> None:
        """One person may have at most ``limits.max_jobs`` jobs queued or running. Without
        sign-in a person is a browser session, and a new session is one page load away, so
        two caps hold as well: one address (``client``) at most
        ``limits.max_jobs_per_address``, and every anonymous session together at most
        ``limits.max_anonymous_jobs``. With the secret, a job counts for the owner its tag
        names; one whose tag does not verify (rewritten by job code) counts as anonymous, so
        rewriting owners frees no slot."""
        active_jobs = []
        for row in db.execute("SELECT job_id, owner, session, owner_tag, client FROM jobs "
                              f"WHERE {ACTIVE_SQL}"):
            signed = self.job_owner(row)[0]
            anon = (signed is None and self.secret is not None) or \
                (signed is not None and signed.startswith(ANONYMOUS))
            active_jobs.append((signed, anon, row["client"]))

        def jobs(n: int) -> str:
            return f"{n} job{'s' * (n != 1)}"
        limits = self.limits
        active = sum(1 for signed, _, _ in active_jobs if signed == owner)
        if active >= limits.max_jobs:
            raise CapReached("person", f"you already have {jobs(active)} queued or running, "
                             f"the most one person may have here ({limits.max_jobs}, "
                             f"COMPRESSION_BENCH_MAX_JOBS): cancel one under My jobs or wait "
                             f"for it to finish")
        if not owner.startswith(ANONYMOUS):
            return  # signed in (or a direct caller): the per-person cap is the one
        if client is not None:
            here = sum(1 for _, anon, at in active_jobs if anon and at == client)
            if here >= limits.max_jobs_per_address:
                raise CapReached("address", f"your address already has {jobs(here)} queued "
                                 f"or running from sessions without sign-in, the most one "
                                 f"address may have ({limits.max_jobs_per_address}, "
                                 f"COMPRESSION_BENCH_MAX_JOBS_PER_ADDRESS; a new session "
                                 f"does not reset it): wait for them to finish, or sign in")
        anonymous = sum(1 for _, anon, _ in active_jobs if anon)
        if anonymous >= limits.max_anonymous_jobs:
            raise CapReached("server", f"the server already has {jobs(anonymous)} queued or "
                             f"running from people not signed in, the most it takes "
                             f"({limits.max_anonymous_jobs}, COMPRESSION_BENCH_MAX_ANONYMOUS_"
                             f"JOBS): try again when some have finished, or sign in")

    def worker_account(self):
        """Whom this queue's workers run as (``benchmarks.service.account``): None for this
        process's own user; resolved (and created) once."""
        if self._account is None:
            from benchmarks.service.account import worker_account
            self._account = (worker_account(),)
            if self._account[0] is not None:
                self.store.open_as = (self._account[0].uid, self._account[0].gid)
        return self._account[0]

    def worker_uids(self) -> set[int]:
        """Who writes the worker's files: the worker's user, where it runs as one of its own,
        else this process's."""
        account = self.worker_account()
        return {account.uid if account is not None else os.geteuid()}

    def job_folder(self, job_id: str) -> Path:
        """A job's own folder, named by its id (a ValueError for anything ``submit`` does not
        make: no row names a path the server acts on)."""
        if not isinstance(job_id, str) or not JOB_ID.fullmatch(job_id):
            raise ValueError(f"{str(job_id)[:40]!r} is not a job id")
        return self.jobs_dir / job_id

    def hand_over(self, job_id: str) -> bool:
        """The uploads a claimed job waits for, moved from the server's folder into the job's
        own, made the worker's (folder and files, through descriptors: job code may have
        planted anything under the job's name). True once they are there; False where there
        was nothing to hand over."""
        folder = self.job_folder(job_id)
        held = self.held_dir / job_id
        if not held.is_dir():
            return False
        account = self.worker_account()
        uid, gid = (account.uid, account.gid) if account is not None else (-1, -1)
        for name in os.listdir(held):  # the server's own folder: its names are its own
            os.chown(held / name, uid, gid, follow_symlinks=False)
        os.chown(held, uid, gid, follow_symlinks=False)
        jobs_fd = self._jobs_folder(uid, gid)
        held_fd = os.open(self.held_dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for _ in range(2):
                try:
                    os.rename(job_id, job_id, src_dir_fd=held_fd, dst_dir_fd=jobs_fd)
                    return True
                except OSError:  # something job code put under the job's name: removed
                    remove_folder(folder, self.path.parent)
                    try:
                        os.unlink(job_id, dir_fd=jobs_fd)
                    except OSError:
                        pass
            raise Refused(f"{folder}: the job's uploads could not be handed to it (something "
                          f"else is there)")
        finally:
            os.close(held_fd)
            os.close(jobs_fd)

    def _jobs_folder(self, uid: int, gid: int) -> int:
        """A descriptor of the jobs' folder (made the worker's where new), reached without
        following a link."""
        from benchmarks.spec.nofollow import open_folder
        try:
            os.mkdir(self.jobs_dir, 0o700)
            os.chown(self.jobs_dir, uid, gid, follow_symlinks=False)
        except FileExistsError:
            pass
        return open_folder(self.jobs_dir, self.path.parent, self.worker_uids())

    def hand_over_claimed(self) -> None:
        """The supervisor's part: each held upload goes to its job once a live worker has
        claimed it, and is removed once its job has ended (or is gone)."""
        try:
            waiting = [n for n in os.listdir(self.held_dir) if JOB_ID.fullmatch(n)]
        except OSError:
            return
        if not waiting:
            return
        live = self.live_workers()
        with self.store.connect() as db:
            rows = {r["job_id"]: r for r in db.execute(
                "SELECT job_id, status, worker_pid FROM jobs WHERE job_id IN (%s)" %
                ",".join("?" * len(waiting)), waiting)}
        for job_id in waiting:
            row = rows.get(job_id)
            if row is None or row["status"] in FINISHED:
                remove_folder(self.held_dir / job_id, server_folder(self.path), {os.geteuid()})
            elif row["status"] == "running" and row["worker_pid"] in live:
                self.hand_over(job_id)

    def attachment_bytes(self) -> int:
        """What the queued and running jobs' files hold (uploads count against a cap): those
        waiting in the server's folder and those in the jobs' folders (walked without
        following a link)."""
        total = 0
        for top, folder, owners in ((server_folder(self.path), self.held_dir, {os.geteuid()}),
                                    (self.path.parent, self.jobs_dir, None)):
            total += tree_bytes(folder, top, owners)
        return total

    def job_owner(self, row) -> tuple[str | None, str]:
        """A stored job's (owner, session): as stored without the secret; with it, those its
        server-signed tag names, else (None, its session column): nobody's."""
        if self.secret is None:
            return row["owner"], row["session"]
        said = tagged_job(self.secret, row["job_id"], row["owner_tag"])
        return said if said is not None else (None, row["session"])

    def _job(self, db, row) -> Job:
        position = None
        if row["status"] == "running":
            position = 0
        elif row["status"] == "queued":
            (ahead,) = db.execute("SELECT COUNT(*) FROM jobs WHERE device=? AND status='queued' "
                                  "AND seq < ?", (row["device"], row["seq"])).fetchone()
            position = ahead + 1
        owner, session = self.job_owner(row)
        payload, payload_error = decoded_payload(row["payload"])
        # The worker's to write, so job code's too: read as nothing where it is not JSON.
        progress = decoded_payload(row["progress"] or "{}")[0]
        return Job(job_id=row["job_id"], kind=row["kind"], status=row["status"],
                   session=session, device=row["device"], payload=payload,
                   payload_error=payload_error, submitted_at=row["submitted_at"],
                   started_at=row["started_at"], finished_at=row["finished_at"],
                   run_id=row["run_id"], progress=progress,
                   error=row["error"], cancel_requested=bool(row["cancel_requested"]),
                   position=position, owner=owner,
                   time_limit_s=row["time_limit_s"], folder=row["folder"],
                   worker_pid=row["worker_pid"], new_run_id=row["new_run_id"],
                   run_tag=row["run_tag"])

    def get(self, job_id: str) -> Job | None:
        with self.store.connect() as db:
            row = db.execute("SELECT * FROM jobs WHERE job_id=?", (job_id,)).fetchone()
            return None if row is None else self._job(db, row)

    def jobs(self, session: str | None = None, limit: int = 50, owner: str | None = None
             ) -> list[Job]:
        """Jobs, newest first; optionally only one session's or one owner's."""
        sql, args, where = "SELECT * FROM jobs", [], []
        # With the secret, a session's or owner's jobs are those whose signed tag names them
        # (its columns may have been rewritten): the tag holds them as JSON, checked below.
        checked = self.secret is not None
        for column, value in (("session", session), ("owner", owner)):
            if value is not None:
                where.append("instr(owner_tag, ?) > 0" if checked else f"{column}=?")
                args.append(json.dumps(value) if checked else value)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY seq DESC"
        checked = checked and bool(where)
        if not checked:
            sql += " LIMIT ?"
            args.append(int(limit))
        with self.store.connect() as db:
            rows = db.execute(sql, args).fetchall()
            if checked:
                rows = [r for r in rows if self._is_of(r, session, owner)][:int(limit)]
            return [self._job(db, r) for r in rows]

    def _is_of(self, row, session: str | None, owner: str | None) -> bool:
        signed_owner, signed_session = self.job_owner(row)
        return signed_owner is not None and (session is None or signed_session == session) \
            and (owner is None or signed_owner == owner)

    def cancel(self, job_id: str, *, by: str | None = None, admin: bool = False) -> bool:
        """A queued job is cancelled at once, and so is a running one whose worker is dead; a
        running one stops between phases (a distributed one at once: every rank is stopped).
        With ``by``, only the job's owner (or ``admin``) may: PermissionError otherwise."""
        with self.store.transaction() as db:
            row = db.execute("SELECT * FROM jobs WHERE job_id=?", (job_id,)).fetchone()
            if row is None or row["status"] in FINISHED:
                return False
            if by is not None and not admin and self.job_owner(row)[0] != by:
                raise PermissionError("only the person who submitted it can cancel this job")
            if row["status"] == "queued" or not holder_alive(row):
                self._end(db, row, "cancelled",
                          None if row["status"] == "queued" else "cancelled (its worker had "
                          "stopped)")
            else:
                db.execute("UPDATE jobs SET cancel_requested=1 WHERE job_id=?", (job_id,))
                return True
        self._remove_folder(row["job_id"])
        return True

    def _end(self, db, row, status: str, error: str | None) -> None:
        """End a job that no worker will finish, and its stored run with it (a cancelled
        job's run reads interrupted)."""
        db.execute("UPDATE jobs SET status=?, error=?, finished_at=? WHERE job_id=? "
                   "AND status IN ('queued', 'running')", (status, error, now_iso(),
                                                           row["job_id"]))
        if row["run_id"]:
            run_status = "interrupted" if status == "cancelled" else status
            db.execute("UPDATE runs SET status=?, error=?, finished_at=? WHERE run_id=? "
                       "AND status IN ('running', 'interrupted')",
                       (run_status, error or "cancelled by the user", now_iso(), row["run_id"]))

    def _remove_folder(self, job_id: str) -> None:
        """A job's files: its own folder (named by its id, only a folder of the worker's, not
        a link) and its uploads still waiting in the server's folder."""
        try:
            folder = self.job_folder(job_id)
        except ValueError:
            return  # not an id submit made: nothing of it is removed
        remove_folder(folder, self.path.parent, self.worker_uids())
        remove_folder(self.held_dir / job_id, server_folder(self.path), {os.geteuid()})


_SHARED: dict[str, JobQueue] = {}
_SHARED_LOCK = threading.Lock()


