"""Every registered job kind on a real worker (issues 26.2 and 33.1): submitted, it runs to
complete on a tiny input; cancelled mid-way, it ends ``cancelled`` and leaves no partial
output (no export folder or zip, no half-written cache entry, no rank, the run marked
interrupted); its worker SIGKILLed mid-way, it ends ``interrupted`` with the cause and
nothing is left behind (no job folder, no export staging, no process, no /dev/shm file of
the dead worker's). The kinds are read from the registry (``benchmarks.service.kinds``), so
a new kind is covered here once it has a case in CASES, and fails loudly until it does. The
export used to ignore Cancel (it ended ``complete`` 7.6 s later with every file).

A toy kind registered by a test module (``tests/toy_kind.py``, named in
COMPRESSION_BENCH_KIND_MODULES) reaches the queue, the worker, the CLI and My jobs; a job row
of a kind nobody registered (an older server's queue) ends failed in one line and the next
job runs."""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from benchmarks.export import files
from benchmarks.service import kinds
from benchmarks.service.queue import JobQueue
from benchmarks.spec.sweep import SweepSpec
from benchmarks.store.database import now_iso
from helpers import FAST, descendants, finished_job, run_cli, wait_until

TOY = "tests.toy_kind"


@pytest.fixture(scope="module")
def warm(export_sweep):
    """The export sweep's store with its worker started and warm, shared by the module; the
    toy kind's module named for every process the module starts (the worker inherits it)."""
    store_path, run_id = export_sweep
    before = os.environ.get(kinds.EXTRA_KINDS_ENV)
    os.environ[kinds.EXTRA_KINDS_ENV] = TOY
    queue = JobQueue(store_path)
    queue.ensure_worker("cpu", wait=True)
    yield queue, run_id
    queue.stop_worker("cpu")
    if before is None:
        os.environ.pop(kinds.EXTRA_KINDS_ENV, None)
    else:
        os.environ[kinds.EXTRA_KINDS_ENV] = before
    kinds.unregister("echo")


# -- each kind's case: a tiny input, a long one, and when a long one is under way ------------

def _sensitivity(levels, finetune_epochs: int = 0) -> dict:
    from benchmarks.sensitivity.config import SensitivityConfig
    config = SensitivityConfig(levels=tuple(levels), confirm=0, verify_rounds=0,
                               finetune_epochs=finetune_epochs)
    return {"model": "seed_cnn", "dataset": "digits", "sweep": SweepSpec(**FAST).to_dict(),
            "sensitivity": config.to_dict()}


def _recommend(trials: int, choices: dict, enabled: set) -> dict:
    from benchmarks.recommend.job import payload
    from benchmarks.recommend.request import RecommendRequest
    return payload(SweepSpec(**FAST), RecommendRequest(within="3pt", trials=trials), choices,
                   enabled)


def _distributed(steps: int) -> dict:
    return {"model": "seed_cnn", "dataset": "digits", "workers": [2], "compressions": ["none"],
            "steps": steps, "batch_size": 16, "device": "cpu", "seed": 0, "amp": False}


def _lm(max_windows: int, ratios: tuple) -> dict:
    from benchmarks.spec.lm import LMOptions, LMRequest
    spec = SweepSpec.from_choices({("prune", "ratio"): ratios, ("prune", "method"): ("wanda",)},
                                  {"prune"}, model="tiny-lm", dataset="text", timing_rounds=2)
    return LMRequest(spec, LMOptions(window=64, max_windows=max_windows, prompt_tokens=16,
                                     new_tokens=2)).to_dict()


@dataclass(frozen=True)
class Case:
    tiny: Callable[[str], dict]   # run id of the module's stored sweep -> a payload done in s
    long: Callable[[str], dict]   # -> a payload that runs long enough to be stopped mid-way
    ready: Callable               # job -> whether the long one is past its start
    cancel_within_s: float = 60.0  # Cancel to its end, on a quiet machine
    # How long the long one runs past ready before it is stopped: well inside its length. An
    # export is a few seconds whole on a quiet machine; at 1 s, one ended complete before the
    # worker saw the Cancel (CI).
    settle_s: float = 1.0


CASES: dict[str, Case] = {
    "sweep": Case(
        tiny=lambda run: SweepSpec(**FAST).to_dict(),
        long=lambda run: SweepSpec.from_toggles(
            prune=0.5, amp=True, **{**FAST, "epochs": 3, "min_time_s": 2.0}).to_dict(),
        ready=lambda job: bool(job.run_id), cancel_within_s=5.0),
    "distributed": Case(
        tiny=lambda run: _distributed(8), long=lambda run: _distributed(100_000),
        ready=lambda job: "step" in ((job.progress or {}).get("message") or ""),
        cancel_within_s=5.0),
    "export": Case(
        tiny=lambda run: {"run_id": run, "variant": "amp"},
        long=lambda run: {"run_id": run, "variant": "prune-channel-0.5"},
        ready=lambda job: True, cancel_within_s=2.0, settle_s=0.2),
    "recommend": Case(
        tiny=lambda run: _recommend(1, {("int8", "mode"): ("dynamic",)}, {"int8"}),
        long=lambda run: _recommend(60, {("prune", "ratio"): tuple(i / 20 for i in range(2, 19)),
                                         ("prune", "finetune_epochs"): 0}, {"prune"}),
        ready=lambda job: bool(job.run_id)),
    "sensitivity": Case(
        tiny=lambda run: _sensitivity([0.5]),
        # Fine-tuned cells (~0.3 s each here): unfine-tuned ones take ~30 ms, and those an
        # earlier test on the same pytest worker measured come from the session's cell cache,
        # so a map of those was over about when it was stopped.
        long=lambda run: _sensitivity([round(0.05 * i, 2) for i in range(1, 20)], 1),
        ready=lambda job: (job.progress or {}).get("phase") == "screening"),
    "lm": Case(  # a language model's run: tiny-lm on a few windows, then on thousands
        tiny=lambda run: _lm(8, (0.5,)),
        long=lambda run: _lm(6000, tuple(i / 20 for i in range(2, 19))),
        ready=lambda job: bool(job.run_id)),
    "echo": Case(  # the toy kind (tests/toy_kind.py), when a module names it
        tiny=lambda run: {"message": "hello"},
        long=lambda run: {"message": "a while", "seconds": 600},
        ready=lambda job: True, cancel_within_s=5.0),
}


def case(kind: str) -> Case:
    """The test case of a registered kind: a kind without one fails here, loudly."""
    if kind not in CASES:
        pytest.fail(f"job kind {kind!r} is registered but {__file__} has no case for it: add "
                    f"its tiny and long payloads to CASES")
    return CASES[kind]


def tiny_payload(kind: str, run_id: str) -> dict:
    return case(kind).tiny(run_id)


# Read at collection: every kind the registry holds (the product's, and any module
# COMPRESSION_BENCH_KIND_MODULES names when the suite starts).
KINDS = kinds.names()


def test_every_registered_kind_has_a_case():
    missing = [k for k in kinds.names() if k not in CASES]
    assert not missing, f"registered job kinds without a case in CASES: {missing}"


# -- what is left behind ------------------------------------------------------------------

def running_for(queue, job_id: str, seconds: float, ready=lambda job: True):
    """The job once it has run ``seconds`` past the moment ``ready(job)`` held."""
    wait_until(lambda: (job := queue.get(job_id)).status == "running" and ready(job), 180,
               f"job {job_id} running")
    time.sleep(seconds)
    job = queue.get(job_id)
    assert job.status == "running", (job.status, job.error)
    return job


def no_partial_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.suffix in (".tmp", ".partial")] \
        if folder.exists() else []


def exports_of(queue, job_id: str) -> list[Path]:
    """Whatever the exports hold under the job's id (its staging folder, its zip)."""
    root = files.exports_root(queue.path)
    return [p for p in root.rglob("*") if job_id in p.name] if root.exists() else []


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def spawned(worker: int, before: set[int]) -> list[int]:
    """The worker's processes started by the job (ranks, loaders) still alive; the
    forkserver the job started stays for the next one by design (its children do not)."""
    return [p for p in descendants(worker) if p not in before
            and not any(s in _cmdline(p) for s in ("forkserver", "resource_tracker"))]


def shm_of(pids) -> list[str]:
    """/dev/shm files named for one of ``pids`` (torch names its shared tensors
    ``torch_PID_...``, a process's own segments carry its pid)."""
    marks = [f"_{pid}_" for pid in pids]
    try:
        names = os.listdir("/dev/shm")
    except OSError:
        return []
    return [n for n in names if any(m in f"_{n}_" for m in marks)]


def nothing_left(queue, job, run_id: str) -> None:
    assert job.folder is None or not Path(job.folder).exists(), job.folder
    assert exports_of(queue, job.job_id) == []
    assert no_partial_files(files.exports_root(queue.path)) == []
    from benchmarks.spec.folders import default_cache_dir
    assert no_partial_files(default_cache_dir()) == []


# -- every kind: complete, cancel, SIGKILL ----------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_a_tiny_job_of_every_kind_runs_to_complete(warm, kind):
    queue, run_id = warm
    queue.ensure_worker("cpu", wait=True)
    job_id = queue.submit(kind, tiny_payload(kind, run_id), session="a", admin=True)
    job = finished_job(queue, job_id, 240)
    assert job.status == "complete", job.error
    if job.run_id:  # a kind that stores a run stores it complete
        assert queue.store.run(job.run_id)["status"] == "complete"
    if kind == "export":
        folder = files.export_folder(queue.path, run_id, "amp", job_id)
        assert files.archive_path(folder).is_file()
    assert job.folder is None or not Path(job.folder).exists()


@pytest.mark.parametrize("kind", KINDS)
def test_cancel_mid_run_ends_every_kind_with_nothing_left(warm, kind):
    queue, run_id = warm
    queue.ensure_worker("cpu", wait=True)  # a worker whose export was interrupted leaves
    worker = queue.worker_card("cpu")["worker_pid"]
    before = set(descendants(worker))
    job_id = queue.submit(kind, case(kind).long(run_id), session="a", admin=True)
    running_for(queue, job_id, case(kind).settle_s, ready=case(kind).ready)
    asked = time.monotonic()
    assert queue.cancel(job_id)
    job = finished_job(queue, job_id, 120, every=0.02)
    took = time.monotonic() - asked
    assert job.status == "cancelled", (job.status, job.error)
    assert took <= case(kind).cancel_within_s, took
    print(f"{kind} cancelled {took:.2f} s after Cancel")
    if job.run_id:
        assert queue.store.run(job.run_id)["status"] == "interrupted"
    nothing_left(queue, job, run_id)
    wait_until(lambda: not spawned(worker, before), 10,
               lambda: f"the job's processes gone (left: {spawned(worker, before)})")


@pytest.mark.parametrize("kind", KINDS)
def test_a_killed_worker_ends_every_kind_interrupted_with_nothing_left(warm, kind):
    queue, run_id = warm
    queue.ensure_worker("cpu", wait=True)
    job_id = queue.submit(kind, case(kind).long(run_id), session="a", admin=True)
    job = running_for(queue, job_id, case(kind).settle_s, ready=case(kind).ready)
    worker = job.worker_pid
    family = [worker, *descendants(worker)]
    os.kill(worker, signal.SIGKILL)
    job = finished_job(queue, job_id, 60)  # the supervisor ends it, with the cause
    assert job.status == "interrupted", (job.status, job.error)
    assert "its worker was killed (SIGKILL" in job.error and "run it again" in job.error
    if job.run_id:  # its run shares its fate, and says why
        run = queue.store.run(job.run_id)
        assert (run["status"], run["error"]) == ("interrupted", job.error)
    wait_until(lambda: not [p for p in family if alive(p)], 30,
               lambda: f"the dead worker's processes gone (left: "
                       f"{[p for p in family if alive(p)]})")
    # The next worker clears what a dead one left (an export's staging folder).
    queue.ensure_worker("cpu", wait=True)
    nothing_left(queue, job, run_id)
    assert shm_of(family) == []


# -- a toy kind, and a kind nobody registered ----------------------------------------------

def test_a_toy_kind_reaches_the_queue_the_worker_the_cli_and_my_jobs(warm):
    queue, _ = warm
    queue.ensure_worker("cpu", wait=True)
    assert "echo" in kinds.names()
    job_id = queue.submit("echo", tiny_payload("echo", ""), session="toy", owner="toy-owner")
    job = finished_job(queue, job_id, 60)
    assert job.status == "complete", job.error
    env = {kinds.EXTRA_KINDS_ENV: TOY}
    listed = run_cli("list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["job_kinds"]["echo"] == "a toy kind: says its message"
    jobs = run_cli("jobs", "--json", "--store", str(queue.path), env=env)
    assert jobs.returncode == 0, jobs.stderr
    row = next(j for j in json.loads(jobs.stdout) if j["job_id"] == job_id)
    assert (row["kind"], row["registered"], row["status"]) == ("echo", True, "complete")
    from dashboard.jobs_view import my_jobs_lines
    [(label, status)] = my_jobs_lines(queue.jobs(owner="toy-owner"))
    assert label.startswith("echo · ") and status == "complete"


def test_a_job_of_an_unregistered_kind_fails_in_one_line_and_the_next_runs(warm):
    queue, _ = warm
    queue.ensure_worker("cpu", wait=True)
    with pytest.raises(ValueError, match="'lm-finetune' is not registered"):
        queue.submit("lm-finetune", {}, session="a")
    # An older or newer server's job, straight into the queue's table.
    with queue.store.transaction() as db:
        db.execute("INSERT INTO jobs (job_id, kind, status, session, device, payload, "
                   "submitted_at) VALUES ('oldkind00001', 'lm-finetune', 'queued', 'a', "
                   "'cpu', '{}', ?)", (now_iso(),))
    after = queue.submit("echo", tiny_payload("echo", ""), session="a")
    old = finished_job(queue, "oldkind00001", 60)
    assert old.status == "failed" and "\n" not in old.error
    assert "'lm-finetune' is not registered" in old.error
    assert all(k in old.error for k in kinds.names()), old.error
    assert finished_job(queue, after, 60).status == "complete"
    listed = run_cli("jobs", "--store", str(queue.path))
    assert listed.returncode == 0, listed.stderr
    assert "lm-finetune (not registered here)" in listed.stdout


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return ""
