"""The worker never runs as root (issue 26.4): a server started as root starts its worker as
an unprivileged user, which runs jobs (the store, the cache and the job folders are its to
write) but cannot open the session secret in the server's own folder, and sees no credential
in its environment. A model file probes it from inside a job, as the issue's factory did (it
read the secret, listed the environment and ran ``id``: uid=0).

Needs root (skipped otherwise). Where this machine's Python sits under a folder closed to
other users (/root, 0700, for pyenv), the server runs in a mount namespace of its own in which
/root is an open tmpfs holding only the real pyenv (nothing changes outside it)."""

from __future__ import annotations

import os
import pwd
import shutil
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from benchmarks.service.account import blocked_at, Account
from benchmarks.service.queue import JobQueue
from benchmarks.service.workers import log_path
from benchmarks.spec.folders import secret_path
from benchmarks.spec.sweep import SweepSpec
from helpers import FAST, ROOT, finished_job, wait_until
from helpers import root_server as root_server_of

USER = "cb-test-worker"
# Serial: it creates and removes a system user, which the whole machine shares.
pytestmark = [pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("useradd"),
                                 reason="needs root and useradd"), pytest.mark.serial]

PROBE = textwrap.dedent('''
    import os
    from torch import nn

    def build(num_classes, in_channels):
        secret = os.environ["COMPRESSION_BENCH_STORE"] + ".server/secret"
        try:
            open(secret, "rb").read()
            read = "read"
        except PermissionError:
            read = "denied"
        leaked = sorted(k for k in os.environ if "SECRET" in k or "TOKEN" in k)
        raise ValueError(f"probe: uid={os.getuid()} secret={read} env={','.join(leaked)}")
''')


@pytest.fixture
def root_server():
    base = Path(tempfile.mkdtemp(prefix="cb-worker-user-"))
    os.chmod(base, 0o755)
    models = base / "models"
    models.mkdir()
    (models / "probe.py").write_text(PROBE)
    with root_server_of(base, USER, models, MY_API_TOKEN="do-not-leak") as store:
        yield store, base


def _why(job, store: Path, base: Path) -> str:
    """What a failed job left to read: each failed variant's error (the job says only
    which failed), the worker's log and the server's."""
    from benchmarks.store.database import ResultsStore
    run = ResultsStore(store).run(job.run_id) if job.run_id else None
    errors = [f"{v.get('name')}: {v.get('error')}" for v in (run or {}).get("variants") or []
              if v.get("error")]
    logs = [p.read_text(errors="replace")[-3000:] for p in
            (log_path(store, "cpu"), base / "server.log") if p.exists()]
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
    secret = secret_path(store)
    assert secret.stat().st_uid == 0 and secret.stat().st_mode & 0o777 == 0o600
    assert secret.parent.stat().st_uid == 0 and secret.parent.stat().st_mode & 0o777 == 0o700
    revoked = secret.parent / "revoked"  # the server's too: a worker's would un-revoke
    assert revoked.stat().st_uid == 0 and revoked.stat().st_mode & 0o777 == 0o600
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
