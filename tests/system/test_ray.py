"""Sweeps and data-parallel runs on a real local Ray cluster: a head and a second raylet
started with `ray start` on this machine, one CPU and one bench slot each, so two nodes. No
mock of Ray anywhere; the cluster is stopped at the end and no process of it is left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import ROOT, scaled, wait_until
from tools.ray_cluster import free_port, local_cluster

ray = pytest.importorskip("ray")

# Serial: a Ray cluster's head and raylets take ports and /tmp/ray for the whole machine.
pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.serial]
SWEEP = ["--prune", "0.5", "--distill", "--temperature", "2,4", "--epochs", "1",
         "--finetune-epochs", "1", "--min-time", "0.05"]


@pytest.fixture(scope="module")
def cluster():
    """A two-node cluster on this machine; every Ray process gone afterwards (the helper
    raises if one is left)."""
    with local_cluster(nodes=2) as address:
        yield address


def _run(*args, timeout=600, **kwargs):
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    return subprocess.run([sys.executable, "-m", "benchmarks", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=scaled(timeout), **kwargs)


def _doc(path) -> dict[str, dict]:
    return {v["name"]: v for v in json.loads(Path(path).read_text())["variants"]}


def test_a_sweep_builds_on_both_nodes_and_matches_the_local_executor(cluster, tmp_path):
    on_ray = _run("run", *SWEEP, "--executor", "ray", "--ray-address", cluster, "--store",
                  str(tmp_path / "s.db"), "--json", str(tmp_path / "ray.json"), "--quiet")
    assert on_ray.returncode == 0, on_ray.stderr
    local = _run("run", *SWEEP, "--no-cache", "--store", str(tmp_path / "s.db"), "--json",
                 str(tmp_path / "local.json"), "--quiet")
    assert local.returncode == 0, local.stderr
    ray_v, local_v = _doc(tmp_path / "ray.json"), _doc(tmp_path / "local.json")
    assert list(ray_v) == list(local_v)
    for name in ray_v:  # the same weights: every test example scored alike
        assert ray_v[name]["raw"]["correct_bits"] == local_v[name]["raw"]["correct_bits"], name
    nodes = {w.split(" (")[0] for v in ray_v.values() for w in v["built_on"]}
    assert len(nodes) == 2, nodes
    timed = {v["timed_on"] for v in ray_v.values()}
    assert len(timed) == 1 and next(iter(timed)).startswith("ray node")
    doc = json.loads((tmp_path / "ray.json").read_text())
    assert doc["environment"]["timed_on"] == next(iter(timed))
    assert len(doc["environment"]["cluster"]["nodes"]) == 2


def test_two_sweeps_at_once_never_time_on_the_same_node_together(cluster, tmp_path):
    procs = [subprocess.Popen(
        [sys.executable, "-m", "benchmarks", "run", *SWEEP, "--min-time", "0.5", "--executor",
         "ray", "--ray-address", cluster, "--store", str(tmp_path / "s.db"), "--json",
         str(tmp_path / f"r{i}.json"), "--quiet", "--no-cache"], cwd=ROOT,
        env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True) for i in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=scaled(600))
        assert p.returncode == 0, err
    windows = []
    for i in range(2):
        variants = _doc(tmp_path / f"r{i}.json")
        (node,) = {v["timed_on"] for v in variants.values()}
        windows.append((node, *next(iter(variants.values()))["timing"]["window"]))
    (node_a, start_a, end_a), (node_b, start_b, end_b) = windows
    assert node_a != node_b or end_a <= start_b or end_b <= start_a, windows


def _task_pids() -> list[int]:
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if cmdline.read_bytes().startswith(b"ray::train"):
                pids.append(int(cmdline.parent.name))
        except OSError:
            continue
    return pids


def test_killing_a_ray_worker_mid_build_touches_only_its_variant(cluster, tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks", "run", "--distill", "--temperature", "2,4",
         "--epochs", "6", "--min-time", "0.05", "--executor", "ray", "--ray-address", cluster,
         "--store", str(tmp_path / "s.db"), "--json", str(out), "--quiet", "--no-cache"],
        cwd=ROOT, env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)

    def kill_a_build_task() -> int | None:
        pids = _task_pids()
        if pids:
            time.sleep(1.0)  # well into its training
            os.kill(pids[0], signal.SIGKILL)
            return pids[0]
        return None
    wait_until(kill_a_build_task, 120, "a build task running (to kill)", every=0.1)
    _, err = proc.communicate(timeout=scaled(600))
    assert proc.returncode in (0, 1), err
    variants = _doc(out)
    failed = {n: v["error"] for n, v in variants.items() if v["error"]}
    # Retried once: it succeeds, or only that variant fails, with one line naming the node.
    assert len(failed) <= 1, failed
    for error in failed.values():
        assert "ray node" in error or "retried once" in error
    assert sum(v["error"] is None for v in variants.values()) >= len(variants) - 1


def test_cancel_stops_the_sweep_and_frees_the_cluster(cluster, tmp_path):
    from benchmarks.executors.ray_executor import RaySweep
    from benchmarks.run.cache import WeightsCache
    from benchmarks.run.runner import prepare_sweep
    from benchmarks.spec.sweep import SweepSpec
    spec = SweepSpec.from_toggles(distill=True, temperature=(1.0, 2.0, 4.0, 8.0), epochs=8)
    sweep = RaySweep(prepare_sweep(spec, cache=WeightsCache(enabled=False)), cluster)
    seen = []
    started = time.monotonic()
    results = list(sweep.run(on_progress=lambda e: seen.append(e.phase),
                             should_stop=lambda: time.monotonic() - started > 3))
    assert sweep.cancelled and results == []
    wait_until(lambda: ray.available_resources().get("bench_slot", 0) >= 2, 60,
               "the cluster's two slots freed", every=0.5)
    assert ray.available_resources().get("bench_slot", 0) == 2  # the running tasks are gone
    ray.shutdown()


def test_ddp_across_two_nodes_sends_the_bytes_of_a_local_run(cluster, tmp_path):
    args = ["distributed", "--workers", "2", "--compression", "none,fp16", "--steps", "6",
            "--batch-size", "16", "--device", "cpu", "--no-store"]
    on_ray = _run(*args, "--executor", "ray", "--ray-address", cluster, "--json",
                  str(tmp_path / "ray.json"))
    assert on_ray.returncode == 0, on_ray.stderr
    local = _run(*args, "--json", str(tmp_path / "local.json"))
    assert local.returncode == 0, local.stderr
    ray_runs = {r["compression"]: r for r in json.loads((tmp_path / "ray.json").read_text())["runs"]}
    local_runs = {r["compression"]: r for r in json.loads((tmp_path / "local.json").read_text())["runs"]}
    for c in ("none", "fp16"):
        assert ray_runs[c]["error"] is None
        assert ray_runs[c]["bytes_per_step"] == local_runs[c]["bytes_per_step"]
        assert len(set(ray_runs[c]["ranks_on"])) == 2  # one rank per node
    assert ray_runs["fp16"]["bytes_per_step"] * 2 == ray_runs["none"]["bytes_per_step"]


def test_a_bad_address_is_one_line_and_exit_2(tmp_path):
    p = _run("run", "--executor", "ray", "--ray-address", f"127.0.0.1:{free_port()}",
             "--store", str(tmp_path / "s.db"), "--quiet", timeout=120)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "no Ray cluster answers" in lines[0], p.stderr
    assert not (tmp_path / "s.db").exists()
