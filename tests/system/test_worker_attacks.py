"""A server that trusts nothing its worker writes: the red team's attacks on a root server whose
worker runs as a user of its own (issue: items 1, 2, 3 and 9).

Job code runs as the worker's user, which owns the store's files, the exports and the jobs'
folders, and may leave processes behind. Each test plays one attack against one root server
(this module's, started once), and checks the server neither reads, writes nor removes
anything of root's, and that the queue goes on:

- the export's zip swapped for a link to the session secret (planted by the test as the
  worker's user, standing for a watcher job code left behind): the owner's Download serves no
  secret, the page says what it refused;
- the worker's log and lock swapped for links (the same): no root file is appended to or
  created when the worker restarts;
- the store itself swapped for a link to an empty file of root's (the same): the server's
  connections do not initialise it;
- a job's ``folder`` column pointed at root's folders (by a model file's own process), then
  Cancel and a killed worker: nothing of root's is removed;
- a model file that leaves a setsid'd process holding the worker's lock and kills its worker:
  the stray is ended and the next job starts within 5 s;
- a model file that reads another person's queued upload: it cannot.

Needs root and useradd (skipped otherwise); serial, as test_worker_user.py.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import textwrap
import time
from datetime import datetime
from pathlib import Path

import pytest

from benchmarks.service.queue import JobQueue
from benchmarks.service.workers import lock_path, log_path
from benchmarks.spec.folders import secret_path
from benchmarks.spec.sweep import SweepSpec
from helpers import FAST, ROOT, finished_job, root_server, scaled, wait_until

USER = "cb-test-worker"
pytestmark = [pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("useradd"),
                                 reason="needs root and useradd"), pytest.mark.serial]

# Forks a process that leaves the worker's session (as a watcher would) keeping what it
# inherited, the worker's lock among it, then kills its own worker.
STRAY = textwrap.dedent("""
    import os
    import signal
    import time

    def build(num_classes, in_channels):
        if os.fork() == 0:
            os.setsid()
            with open({drop!r} + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename({drop!r} + ".tmp", {drop!r})
            time.sleep(120)
            os._exit(0)
        while not os.path.exists({drop!r}):
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGKILL)
""")

# A process of its own (no authorizer; the trigger dropped) points the running job's folder
# and the queued one's at root's folders, then waits to be killed.
FOLDER = textwrap.dedent("""
    import os
    import subprocess
    import sys
    import time

    ATTACK = '''
    import sqlite3, sys
    db = sqlite3.connect(sys.argv[1], timeout=60)
    db.execute("DROP TRIGGER IF EXISTS jobs_identity_is_fixed")
    db.execute("UPDATE jobs SET folder=? WHERE status='running'", (sys.argv[2],))
    db.execute("UPDATE jobs SET folder=? WHERE status='queued'", (sys.argv[3],))
    db.commit()
    '''

    def build(num_classes, in_channels):
        subprocess.run([sys.executable, "-c", ATTACK, os.environ["COMPRESSION_BENCH_STORE"],
                        {running!r}, {queued!r}], check=True, timeout=120)
        time.sleep(300)
""")

# A model that says something on its way (job output, which goes to the worker's log).
NOISY = textwrap.dedent("""
    import sys

    from torch import nn

    def build(num_classes, in_channels):
        print("job output", file=sys.stderr, flush=True)
        return nn.Sequential(nn.Flatten(), nn.Linear(in_channels * 64, num_classes))
""")

# Waits for someone else's job with an upload to be queued, then tries to read the upload
# where the payload says it is and anywhere beside the store.
SNOOP = textwrap.dedent("""
    import json
    import os
    import sqlite3
    import time

    def build(num_classes, in_channels):
        store = os.environ["COMPRESSION_BENCH_STORE"]
        found, deadline = None, time.time() + 120
        while found is None and time.time() < deadline:
            db = sqlite3.connect(store, timeout=60)
            for (payload,) in db.execute("SELECT payload FROM jobs WHERE status='queued'"):
                found = json.loads(payload).get("checkpoint") or found
            db.close()
            time.sleep(0.05)
        said = []
        places = [found] + [os.path.join(at, name)
                            for at, _, names in os.walk(os.path.dirname(store))
                            for name in names if name == os.path.basename(found)]
        for place in places:
            try:
                with open(place, "rb") as f:
                    f.read()
                said.append("read " + place)
            except OSError as exc:
                said.append(type(exc).__name__)
        raise ValueError("snoop: " + ", ".join(said))
""")


@pytest.fixture(scope="module")
def server():
    """(store, base): a root server whose worker runs as USER, its models folder holding the
    attackers' model files; base/drop is where they may write for the test to read."""
    base = Path(tempfile.mkdtemp(prefix="cb-worker-attacks-"))
    os.chmod(base, 0o755)
    drop = base / "drop"
    drop.mkdir(mode=0o777)
    os.chmod(drop, 0o777)
    models = base / "models"
    models.mkdir()
    (models / "stray.py").write_text(STRAY.format(drop=str(drop / "stray.pid")))
    (models / "folder.py").write_text(FOLDER.format(running=str(base / "root-running"),
                                                    queued=str(base / "root-queued")))
    (models / "snoop.py").write_text(SNOOP)
    (models / "noisy.py").write_text(NOISY)
    before = os.environ.get("COMPRESSION_BENCH_WORKER_USER")
    # This process's queues (the submitting "server" side of each test) know the worker's
    # user as the server does.
    os.environ["COMPRESSION_BENCH_WORKER_USER"] = USER
    try:
        with root_server(base, USER, models) as store:
            yield store, base
    finally:
        os.environ["COMPRESSION_BENCH_WORKER_USER"] = before or "root"


def plant(path: Path, target: Path) -> str:
    """As the worker's user (what a watcher job code left may do): replace ``path`` with a link
    to ``target``. "planted", or "refused" where that user cannot."""
    import pwd
    entry = pwd.getpwnam(USER)
    # A link made beside it, renamed over it: one step, as an attacker would (a remove, then
    # a link, leaves a gap in which the server's next open creates the file again).
    script = 'ln -sfn -- "$2" "$1.planting" 2>/dev/null && mv -fT -- "$1.planting" "$1" ' \
             '2>/dev/null && echo planted || { rm -f -- "$1.planting"; echo refused; }'
    done = subprocess.run(["sh", "-c", script, "sh", str(path), str(target)],
                          capture_output=True, text=True, user=entry.pw_uid,
                          group=entry.pw_gid, extra_groups=[], cwd="/", timeout=scaled(60))
    return done.stdout.strip() or done.stderr.strip()


def plain_job(queue: JobQueue, session: str = "a") -> str:
    return queue.submit("sweep", SweepSpec(model="mlp", **FAST).to_dict(), session=session)


def why(queue, job_id, store: Path, base: Path) -> str:
    """What a job that went wrong left to read: its error, the worker's and the server's
    logs, the store's folder."""
    job = queue.get(job_id)
    logs = [p.read_text(errors="replace")[-2000:] for p in
            (log_path(store, "cpu"), base / "server.log") if p.exists()]
    listing = subprocess.run(["ls", "-la", str(store.parent)], capture_output=True, text=True)
    return "\n".join([f"job: {job.status} {job.error}", *logs, listing.stdout])


def worker_pid(queue: JobQueue) -> int:
    """The worker's pid, once one is warm (a job run to start one where none is)."""
    if queue.worker_card("cpu") is None:
        finished_job(queue, plain_job(queue), 240)
    return wait_until(lambda: (card := queue.worker_card("cpu")) and card["worker_pid"], 120,
                      "the worker's card")


def started(job) -> float:
    return datetime.fromisoformat(job.started_at).timestamp()


def test_a_swapped_export_zip_serves_no_secret(server, monkeypatch):
    """The zip a finished export left, swapped for a link to the server's secret: the page
    refuses it in one line, and no Download serves the secret."""
    from streamlit.runtime.media_file_manager import MediaFileManager
    from streamlit.testing.v1 import AppTest

    from benchmarks.export import files
    store, base = server
    queue = JobQueue(store)
    run_job = finished_job(queue, plain_job(queue), 240)
    assert run_job.status == "complete", why(queue, run_job.job_id, store, base)
    monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(store))
    monkeypatch.setenv("COMPRESSION_BENCH_SHARED_EXPORTS", "on")  # the run is nobody's
    served = []  # what a click on a zip's Download would serve (a deferred download)
    record = MediaFileManager.add_deferred
    monkeypatch.setattr(MediaFileManager, "add_deferred", lambda self, data, *a, **k: (
        served.append(data) if str(k.get("file_name")).endswith(".zip") else None) or
        record(self, data, *a, **k))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=scaled(60)).run()
    try:
        at.query_params["run"] = run_job.run_id
        at.switch_page("pages/results.py").run()
        key = f"results-{run_job.run_id}"
        at.selectbox(key=f"{key}-export-variant").set_value("baseline").run()
        at.button(key=f"{key}-export").click().run()

        def zipped():
            if any(b.label.endswith("(zip)") for b in at.get("download_button")):
                return True
            assert not at.error, [e.value for e in at.error]
            at.run()
            return False
        wait_until(zipped, 240, "the export's zip on the page", every=1)
        assert served and served[-1]().startswith(b"PK")  # the zip, as the owner gets it
        export_job = [j for j in queue.jobs() if j.kind == "export"][0]
        zip_file = files.archive_path(files.export_folder(store, run_job.run_id, "baseline",
                                                          export_job.job_id))
        assert plant(zip_file, secret_path(store)) == "planted"
        served.clear()
        at.run()
        secret = secret_path(store).read_bytes()
        assert all(secret not in fn() for fn in served)
        assert not any(b.label.endswith("(zip)") for b in at.get("download_button"))
        (error,) = [e.value for e in at.error]
        assert "refused" in error and "link" in error and "\n" not in error, error
    finally:
        JobQueue.shared(store).stop_supervising()  # the page's queue, in this process


def test_a_swapped_worker_log_is_never_appended_to(server):
    """The worker's user replaces the worker's log with a link to a root file, and the worker
    dies: the server starts the next one without writing through the link."""
    store, base = server
    victim = base / "root-log-victim"
    victim.write_bytes(b"root's\n")
    os.chmod(victim, 0o600)
    queue = JobQueue(store)
    pid = worker_pid(queue)
    said = plant(log_path(store, "cpu"), victim)
    os.kill(pid, signal.SIGKILL)
    job = finished_job(queue, queue.submit("sweep", SweepSpec(
        model=f"{base / 'models' / 'noisy.py'}:build", **FAST).to_dict(), session="m"), 240)
    assert victim.read_bytes() == b"root's\n", said
    assert job.status == "complete", why(queue, job.job_id, store, base)
    assert said == "refused"  # the server's own folder is closed to it


def test_a_swapped_worker_lock_creates_nothing_of_roots(server):
    """The worker's user replaces the worker's lock with a link to a path of its choosing:
    the server's liveness check and the next start create nothing there."""
    store, base = server
    target = base / "created-by-root"
    queue = JobQueue(store)
    pid = worker_pid(queue)
    said = plant(lock_path(store, "cpu"), target)
    job = finished_job(queue, plain_job(queue), 240)  # the server looks at its worker
    os.kill(pid, signal.SIGKILL)
    again = finished_job(queue, plain_job(queue), 240)  # and starts the next one
    assert not target.exists(), said
    assert (job.status, again.status) == ("complete", "complete"), \
        why(queue, again.job_id, store, base)
    assert said == "refused"


def test_a_jobs_folder_column_removes_nothing_of_roots(server):
    """Job code points its running job's folder, and the queued job's, at root's folders;
    the queued one is cancelled and the worker killed: both folders stay, and the next job
    runs."""
    store, base = server
    victims = [base / "root-running", base / "root-queued"]
    for folder in victims:
        folder.mkdir(mode=0o700)
        (folder / "keep").write_bytes(b"root's")
    queue = JobQueue(store)
    pid = worker_pid(queue)
    attacker = queue.submit("sweep", SweepSpec(model=f"{base / 'models' / 'folder.py'}:build",
                                               **FAST).to_dict(), session="m")
    waiting = plain_job(queue)
    with queue.store.connect() as db:
        wait_until(lambda: db.execute("SELECT folder FROM jobs WHERE job_id=?", (waiting,)
                                      ).fetchone()[0] == str(victims[1]), 240,
                   lambda: f"the attack ({why(queue, attacker, store, base)})")
    assert queue.cancel(waiting)
    assert (victims[1] / "keep").is_file()  # Cancel removed nothing of root's
    os.kill(pid, signal.SIGKILL)
    ended = finished_job(queue, attacker, 60)
    assert ended.status == "interrupted", ended.error
    assert (victims[0] / "keep").is_file()  # nor did the supervisor, ending the dead job
    assert queue.get(waiting).status == "cancelled"
    job = finished_job(queue, plain_job(queue), 240)
    assert job.status == "complete", why(queue, job.job_id, store, base)


def test_a_stray_holding_the_lock_is_ended_and_the_next_job_starts_within_5_s(server):
    """A model file forks a process that leaves the worker's session with the worker's lock,
    then kills its worker: the stray is ended and the next job starts within 5 s."""
    store, base = server
    drop = base / "drop" / "stray.pid"
    queue = JobQueue(store)
    worker_pid(queue)
    stray = queue.submit("sweep", SweepSpec(model=f"{base / 'models' / 'stray.py'}:build",
                                            **FAST).to_dict(), session="m")
    following = plain_job(queue)
    try:
        wait_until(drop.exists, 240, lambda: f"the stray ({why(queue, stray, store, base)})")
        died = drop.stat().st_mtime  # the factory kills its worker right after
        stray_pid = int(drop.read_text())
        next_job = wait_until(lambda: (j := queue.get(following)).started_at and j, 30,
                              lambda: f"the next job starting "
                                      f"({why(queue, following, store, base)})")
        assert started(next_job) - died <= scaled(5), started(next_job) - died
        assert queue.get(stray).status == "interrupted"
        wait_until(lambda: not Path(f"/proc/{stray_pid}").exists() or
                   Path(f"/proc/{stray_pid}/stat").read_text().split()[2] == "Z", 10,
                   "the stray ending")
        assert finished_job(queue, following, 240).status == "complete"
    finally:
        if drop.exists():
            try:
                os.kill(int(drop.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
            drop.unlink()


def test_a_queued_upload_is_unreadable_to_other_jobs_until_its_own_runs(server):
    """Alice's job (a model file) looks for Bob's queued upload, by the path his job names and
    anywhere beside the store: it reads nothing. Bob's job then runs with it."""
    from safetensors.torch import save

    from benchmarks.zoo.models import create_model
    store, base = server
    queue = JobQueue(store)
    worker_pid(queue)
    alice = queue.submit("sweep", SweepSpec(model=f"{base / 'models' / 'snoop.py'}:build",
                                            **FAST).to_dict(), session="alice")
    wait_until(lambda: queue.get(alice).status == "running", 120, "Alice's job starting")
    upload = Path(tempfile.mkdtemp(prefix="cb-upload-")) / "mine.safetensors"
    model = create_model("mlp", 10, 1, (8, 8))
    upload.write_bytes(save({k: v.contiguous() for k, v in model.state_dict().items()}))
    bob = queue.submit("sweep", SweepSpec(model="mlp", **FAST).to_dict(), session="bob",
                       attachments={"checkpoint": str(upload)})
    snooped = finished_job(queue, alice, 240)
    assert snooped.status == "failed" and "snoop: " in (snooped.error or ""), snooped.error
    assert "read" not in snooped.error.split("snoop: ", 1)[1], snooped.error
    done = finished_job(queue, bob, 240)
    assert done.status == "complete", why(queue, bob, store, base)
    assert queue.store.run(done.run_id)["variants"][0]["accuracy"] is not None
    assert not Path(done.payload["checkpoint"]).parent.exists()  # removed at its end
    shutil.rmtree(upload.parent, ignore_errors=True)


def test_a_swapped_store_file_is_opened_with_the_worker_users_rights(server):
    """The worker's user replaces the store itself with a link to an empty file of root's:
    the server's connections (its supervisor's, every half second) open it with that user's
    rights, so they fail (one line in its log) and write nothing there. The store put back,
    the queue goes on."""
    store, base = server
    victim = base / "root-empty"
    victim.write_bytes(b"")
    os.chmod(victim, 0o600)
    queue = JobQueue(store)
    worker_pid(queue)
    kept = store.with_name(store.name + ".kept")
    os.link(store, kept)  # the store's file, put back below
    try:
        assert plant(store, victim) == "planted"
        time.sleep(scaled(2))  # the server's supervisor has opened the store a few times
        assert victim.read_bytes() == b""  # root's SQLite would initialise it (4096 bytes)
        assert not victim.with_name(victim.name + "-wal").exists()
    finally:
        os.replace(kept, store)
    job = finished_job(queue, plain_job(queue), 240)
    assert job.status == "complete", why(queue, job.job_id, store, base)
