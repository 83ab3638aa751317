"""The memory limit's two ways (benchmarks/service/memory_guard.py): the cgroup v2 set-up,
against a fake cgroup file system (this machine has cgroup v1, where the real one cannot be
made), and the watchdog's count of shared memory, against a real process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from benchmarks.service import memory_guard as guard


def fake_cgroups(tmp_path, subtree="memory", procs=None):
    fs = tmp_path / "cgroup"
    base = fs / "system.slice" / "bench.service"
    base.mkdir(parents=True)
    (fs / "cgroup.controllers").write_text("cpu io memory pids\n")
    (base / "cgroup.controllers").write_text("cpu memory pids\n")
    (base / "cgroup.subtree_control").write_text(subtree + "\n")
    (base / "cgroup.procs").write_text("\n".join(map(str, procs or [os.getpid()])) + "\n")
    proc_self = tmp_path / "self-cgroup"
    proc_self.write_text("0::/system.slice/bench.service\n")
    return fs, base, proc_self


def test_a_delegated_cgroup_gets_a_worker_slot_with_the_limit(tmp_path):
    fs, base, proc_self = fake_cgroups(tmp_path)
    slot = guard.worker_cgroup("cuda:1", 3 * 2**30, fs, proc_self)
    assert slot == base / "compression-bench-worker-cuda-1"
    assert (slot / "memory.max").read_text() == str(3 * 2**30)
    assert guard.enter(slot, 4242) and (slot / "cgroup.procs").read_text() == "4242"
    (slot / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert guard.oom_kills(slot) == 1


def test_a_server_alone_in_its_cgroup_moves_into_a_leaf_and_delegates(tmp_path):
    fs, base, proc_self = fake_cgroups(tmp_path, subtree="")
    slot = guard.worker_cgroup("cpu", 2**30, fs, proc_self)
    assert slot is not None
    assert (base / "compression-bench-server" / "cgroup.procs").read_text() == str(os.getpid())
    assert (base / "cgroup.subtree_control").read_text() == "+memory"


def test_no_cgroup_where_others_share_it_v1_or_the_operator_says_off(tmp_path, monkeypatch):
    fs, base, proc_self = fake_cgroups(tmp_path, subtree="", procs=[os.getpid(), 1])
    assert guard.worker_cgroup("cpu", 2**30, fs, proc_self) is None  # not ours to rearrange
    assert not (base / "compression-bench-server").exists()
    assert guard.worker_cgroup("cpu", 2**30, tmp_path / "no-cgroup2", proc_self) is None
    fs, base, proc_self = fake_cgroups(tmp_path / "again")
    monkeypatch.setenv("COMPRESSION_BENCH_CGROUP", "off")
    assert guard.worker_cgroup("cpu", 2**30, fs, proc_self) is None


def test_the_watchdog_counts_shared_memory_and_its_line_names_the_limit():
    # 256 MiB of touched shared anonymous memory: not data (RLIMIT_DATA misses it), counted.
    code = textwrap.dedent("""
        import mmap, sys
        m = mmap.mmap(-1, 256 << 20, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
        m.write(b"x" * (256 << 20))
        print("ready", flush=True)
        sys.stdin.read()
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        held = guard.held_bytes(proc.pid, 2**30)
        assert 256 << 20 <= held < 400 << 20, held
        # Past a limit it is counted exactly too (Pss), and it is what the limit sees.
        assert guard.held_bytes(proc.pid, 128 << 20) >= 256 << 20
    finally:
        guard.kill_tree(proc.pid)
        proc.wait()
    assert guard.over_limit_line(3 * 2**30, int(3.2 * 2**30)).startswith(
        "exceeded its memory limit of 3.0 GiB")


def test_shm_files_are_the_users_own_written_since_and_new_ones_are_removed(tmp_path):
    """Issue 31.5: the /dev/shm files a job wrote (counted against the worker's limit while
    they exist, since no process maps them) are told from those there before it."""
    import time

    from benchmarks.service import memory_guard as mg
    old = tmp_path / "before-the-job"
    old.write_bytes(b"x" * 8192)
    (tmp_path / "sem.shared").write_bytes(b"x")  # a named semaphore: never ours to remove
    before = mg.shm_files(os.getuid(), tmp_path)
    since = time.time() - 1
    new = tmp_path / "written-by-the-job"
    new.write_bytes(b"y" * (1 << 20))
    assert mg.shm_bytes(os.getuid(), since, tmp_path) >= 1 << 20
    assert mg.shm_files(os.getuid() + 1, tmp_path) == {}  # another user's: not counted
    assert mg.new_shm_files(before, os.getuid(), tmp_path) == ["written-by-the-job"]
    assert mg.remove_shm_files(["written-by-the-job"], tmp_path) == ["written-by-the-job"]
    assert old.exists() and not new.exists() and (tmp_path / "sem.shared").exists()


def test_the_watchdog_counts_a_dev_shm_file_no_process_maps(tmp_path):
    """Issue 31.5: a worker that writes a file to /dev/shm and closes it holds that memory
    (nothing maps it, RssShmem misses it): the watchdog counts it and stops the worker."""
    import uuid

    from benchmarks.service.queue import JobQueue
    from helpers import wait_until
    shm = Path("/dev/shm") / f"compression-bench-test-{uuid.uuid4().hex[:8]}"
    code = textwrap.dedent(f"""
        import sys
        print("ready", flush=True)
        sys.stdin.readline()
        with open({str(shm)!r}, "wb") as f:
            f.write(b"x" * (256 << 20))
        print("written", flush=True)
        sys.stdin.read()
    """)
    queue = JobQueue(tmp_path / "results.db")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    watchdog = None
    try:
        assert proc.stdout.readline().strip() == "ready"
        # The limit: what the process holds now and 128 MiB more; the file is 256 MiB.
        limit = guard.held_bytes(proc.pid, 2**40) + (128 << 20)
        queue._spawned.append(proc)
        watchdog = guard.MemoryGuard(queue, limit, interval=0.02)
        watchdog.start()
        wait_until(lambda: proc.pid in watchdog._shm_since, 30, "the watchdog seeing it")
        proc.stdin.write("go\n")
        proc.stdin.flush()
        wait_until(lambda: proc.poll() is not None, 60, "the watchdog stopping the writer")
        status, line = queue._causes[proc.pid]
        assert status == "failed" and line.startswith("exceeded its memory limit")
    finally:
        if watchdog is not None:
            watchdog.stop()
        guard.kill_tree(proc.pid)
        proc.wait()
        shm.unlink(missing_ok=True)
