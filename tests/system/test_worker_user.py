"""The worker never runs as root (issue 26.4): a server started as root starts its worker as
an unprivileged user, which runs jobs (the store, the cache and the job folders are its to
write) but cannot open the session secret beside the store, and sees no credential in its
environment. A model file probes it from inside a job, as the issue's factory did (it read
the secret, listed the environment and ran ``id``: uid=0).

Needs root (skipped otherwise). Where this machine's Python sits under a folder closed to
other users (/root, 0700, for pyenv), the server runs in a mount namespace of its own in which
/root is an open tmpfs holding only the real pyenv (nothing changes outside it)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from benchmarks.service.account import blocked_at, Account
from benchmarks.service.queue import JobQueue
from benchmarks.spec.sweep import SweepSpec
from helpers import FAST, ROOT, finished_job, wait_until

USER = "cb-test-worker"
# Serial: it creates and removes a system user, which the whole machine shares.
pytestmark = [pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("useradd"),
                                 reason="needs root and useradd"), pytest.mark.serial]

PROBE = textwrap.dedent('''
    import os
    from torch import nn

    def build(num_classes, in_channels):
        secret = os.environ["COMPRESSION_BENCH_STORE"] + ".secret"
        try:
            open(secret, "rb").read()
            read = "read"
        except PermissionError:
            read = "denied"
        leaked = sorted(k for k in os.environ if "SECRET" in k or "TOKEN" in k)
        raise ValueError(f"probe: uid={os.getuid()} secret={read} env={','.join(leaked)}")
''')


def _namespace_command(base: Path, command: list[str]) -> list[str]:
    """``command`` in a private mount namespace where the interpreter's closed ancestor (if
    any) is an open tmpfs holding just the interpreter's installation."""
    python = Path(sys.executable).resolve()
    nobody = Account("nobody", 65534, 65534)
    closed = blocked_at(python, nobody)
    if closed is None:
        return command
    inside = python.relative_to(closed).parts[0]  # e.g. .pyenv under /root
    stage = base / "stage"
    stage.mkdir()
    script = (f"set -e; mount --make-rprivate /; mount --bind {closed / inside} {stage}; "
              f"mount -t tmpfs -o mode=0755 tmpfs {closed}; mkdir -p {closed / inside}; "
              f"mount --bind {stage} {closed / inside}; exec \"$@\"")
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
            *command]


@pytest.fixture
def root_server():
    from tools.browser import free_port, stop_server, wait_healthy
    created = False
    try:
        pwd.getpwnam(USER)
    except KeyError:
        created = True  # the product creates it (useradd --system); removed afterwards
    base = Path(tempfile.mkdtemp(prefix="cb-worker-user-"))
    os.chmod(base, 0o755)
    models = base / "models"
    models.mkdir()
    (models / "probe.py").write_text(PROBE)
    store = base / "srv" / "results.db"
    port = free_port()
    env = {**os.environ, "COMPRESSION_BENCH_STORE": str(store),
           "COMPRESSION_BENCH_CACHE": str(base / "cache"),
           "COMPRESSION_BENCH_MODELS_DIR": str(models), "COMPRESSION_BENCH_WORKER_USER": USER,
           "COMPRESSION_BENCH_WORKER_MEMORY": "off", "MY_API_TOKEN": "do-not-leak",
           "TORCH_HOME": str(base / "hub"), "HF_HOME": str(base / "hub")}
    env.pop("COMPRESSION_BENCH_SECRET", None)
    log = open(base / "server.log", "wb")
    proc = subprocess.Popen(_namespace_command(base, [
        sys.executable, "-m", "streamlit", "run", "serve.py", "--server.port", str(port),
        "--server.headless", "true"]), cwd=ROOT, env=env, stdout=log, stderr=log,
        start_new_session=True)
    try:
        wait_healthy(f"http://localhost:{port}", proc)
        yield store, base
    finally:
        stop_server(proc, store)
        log.close()
        shutil.rmtree(base, ignore_errors=True)
        if created:  # once its processes are gone (userdel refuses a user still running)
            uid = pwd.getpwnam(USER).pw_uid
            wait_until(lambda: not any(p.stat().st_uid == uid for p in Path("/proc").glob(
                "[0-9]*")), 30, f"{USER}'s processes ending")
            done = subprocess.run(["userdel", USER], capture_output=True, text=True)
            assert done.returncode == 0, done.stderr


def _why(job, store: Path, base: Path) -> str:
    """What a failed job left to read: each failed variant's error (the job says only
    which failed), the worker's log and the server's."""
    from benchmarks.store.database import ResultsStore
    run = ResultsStore(store).run(job.run_id) if job.run_id else None
    errors = [f"{v.get('name')}: {v.get('error')}" for v in (run or {}).get("variants") or []
              if v.get("error")]
    logs = [p.read_text(errors="replace")[-3000:] for p in
            (store.with_name(f"{store.name}.worker-cpu.log"), base / "server.log") if p.exists()]
    return "\n".join([f"job: {job.error}", *errors, *logs])


def test_a_root_servers_worker_runs_as_another_user_and_cannot_open_the_secret(root_server,
                                                                            monkeypatch):
    store, base = root_server
    queue = JobQueue(store)
    plain = queue.submit("sweep", SweepSpec(model="mlp", **FAST).to_dict(), session="a")
    probe = queue.submit("sweep", SweepSpec(model=f"{base / 'models' / 'probe.py'}:build",
                                            **FAST).to_dict(), session="a")
    # The server's supervisor starts the worker: nobody here calls ensure_worker.
    done = finished_job(queue, plain, 240)
    assert done.status == "complete", _why(done, store, base)
    card = wait_until(lambda: queue.worker_card("cpu"), 60, "the worker's card")
    assert card["user"] == USER and card["uid"] == pwd.getpwnam(USER).pw_uid != 0
    status = Path(f"/proc/{card['worker_pid']}/status").read_text()
    uids = next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1:]
    assert set(uids) == {str(card["uid"])}  # real, effective, saved and fs: none is root
    probed = finished_job(queue, probe, 120)
    assert probed.status == "failed"
    assert f"probe: uid={card['uid']} secret=denied env=" in probed.error, probed.error
    assert probed.error.rstrip().endswith("env=")  # no MY_API_TOKEN, no secret variable
    # What the worker wrote is its own; the secret stays the server's, and private.
    for private in (store.with_name("results.db.secret"), store.with_name("results.db.revoked")):
        assert private.stat().st_uid == 0 and private.stat().st_mode & 0o777 == 0o600, private
    assert store.stat().st_uid == card["uid"] and store.stat().st_mode & 0o077 == 0
    assert store.parent.stat().st_mode & 0o7777 == 0o1770
    cached = list((base / "cache").glob("*.safetensors"))
    assert cached and all(p.stat().st_uid == card["uid"] for p in cached)
    # Outside the namespace, where the interpreter is out of the worker's reach, a start is
    # refused in one line naming the folder.
    entry = pwd.getpwnam(USER)
    closed = blocked_at(Path(sys.executable).resolve(), Account(USER, entry.pw_uid,
                                                                entry.pw_gid))
    if closed is not None:
        monkeypatch.setenv("COMPRESSION_BENCH_WORKER_USER", USER)
        with pytest.raises(ValueError, match=f"cannot reach the Python interpreter .*{closed}"):
            JobQueue(store)._worker_env(ROOT)  # what ensure_worker does before it spawns
