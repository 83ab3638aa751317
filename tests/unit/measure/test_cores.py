"""The cores timings claim across the product's processes (``benchmarks.measure.cores``, by
``pinned_threads``): processes timing at once get a core each, one that finds every core held
shares one and says so, a killed process's core goes to the next; in one process a timing
inside a timing reuses its cores, and the claim is released and the affinity restored on the
way out, an exception's too."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys

import pytest
import torch
from helpers import ROOT, scaled

from benchmarks.measure.cores import LOCKS_ENV, lock_folder
from benchmarks.measure.latency import pinned_threads

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_getaffinity")
                                or len(os.sched_getaffinity(0)) < 2,
                                reason="claims need two cores to choose between")

# A timing process: on this machine's last two cores (so every core it may use can be held
# on a bigger machine too), it says it is ready, claims one core when told, says which, and
# holds it until its stdin closes.
CHILD = """
import json, os, sys
os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[-2:])
from benchmarks.measure.latency import pinned_threads
print("ready", flush=True)
sys.stdin.readline()
with pinned_threads(1) as claim:
    print(json.dumps({**claim.to_dict(), "affinity": sorted(os.sched_getaffinity(0))}),
          flush=True)
    sys.stdin.readline()
"""


def _start() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD], cwd=ROOT, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def _go(*procs: subprocess.Popen) -> list[dict]:
    """Tell each to claim, all at once; what each claimed."""
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    return [json.loads(p.stdout.readline()) for p in procs]


def test_processes_timing_at_once_claim_cores_of_their_own_and_a_third_shares(
        tmp_path, monkeypatch):
    monkeypatch.setenv(LOCKS_ENV, str(tmp_path))
    # Four interpreters loading torch side by side; each claims only when told.
    first, second, third, fourth = procs = [_start() for _ in range(4)]
    try:
        assert [p.stdout.readline().strip() for p in procs] == ["ready"] * 4
        a, b = _go(first, second)
        assert a["shared"] == b["shared"] == []
        assert len(a["cores"]) == len(b["cores"]) == 1 and a["cores"] != b["cores"]
        assert a["affinity"] == a["cores"] and b["affinity"] == b["cores"]
        # Both cores held: the third takes one anyway and says it is shared.
        (c,) = _go(third)
        assert c["cores"] == c["shared"] and c["cores"][0] in a["cores"] + b["cores"]
        # A process killed while it holds its core leaves no claim behind.
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=scaled(30))
        (d,) = _go(fourth)
        assert d == {"cores": a["cores"], "shared": [], "affinity": a["cores"]}
    finally:
        for p in procs:
            p.stdin.close()
        for p in procs:
            assert p.wait(timeout=scaled(60)) in (0, -signal.SIGKILL)


def _free(core: int) -> bool:
    """Whether another process could claim ``core`` now."""
    fd = os.open(lock_folder() / f"core-{core}.lock", os.O_RDONLY | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_a_timing_inside_a_timing_reuses_its_core_and_every_claim_is_released(
        tmp_path, monkeypatch):
    monkeypatch.setenv(LOCKS_ENV, str(tmp_path))
    affinity, threads = os.sched_getaffinity(0), torch.get_num_threads()
    last = max(affinity)
    with pinned_threads(1) as outer:
        assert outer.to_dict() == {"cores": [last], "shared": []}
        assert os.sched_getaffinity(0) == {last} and not _free(last)
        with pinned_threads(1) as inner:  # a roof measured inside a sweep's timing
            assert inner == outer and os.sched_getaffinity(0) == {last}
        assert not _free(last)  # the outer timing still holds it
    assert _free(last) and os.sched_getaffinity(0) == affinity
    with pytest.raises(RuntimeError), pinned_threads(1):
        raise RuntimeError("a timing that fails")
    assert _free(last) and os.sched_getaffinity(0) == affinity
    assert torch.get_num_threads() == threads
