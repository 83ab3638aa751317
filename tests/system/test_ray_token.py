"""A Ray cluster that takes only clients with its token (``RAY_AUTH_MODE=token``, Ray 2.52+),
as a team's cluster should be run: a real local two-node cluster started with a token; a sweep
and a ``distributed`` benchmark given the token run on it; a client without it, or with another,
gets one line naming the variables to set, exit 2, nothing stored."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

import pytest

from helpers import ROOT, scaled
from tools.ray_cluster import local_cluster, token_env

ray = pytest.importorskip("ray")

# Serial: a Ray cluster's head and raylets take ports and /tmp/ray for the whole machine.
pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.serial]
TOKEN = secrets.token_hex(16)


@pytest.fixture(scope="module")
def cluster():
    with local_cluster(nodes=2, token=TOKEN) as address:
        yield address


def _run(*args, token: str | None, timeout=600):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env.update(RAY_USAGE_STATS_ENABLED="0", **token_env(token))
    if token:  # the token alone is enough: the product asks for token mode with it
        env.pop("RAY_AUTH_MODE")
    return subprocess.run([sys.executable, "-m", "benchmarks", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=scaled(timeout))


def test_with_its_token_a_sweep_and_a_distributed_run_use_both_nodes(cluster, tmp_path):
    sweep = _run("run", "--distill", "--temperature", "2,4", "--epochs", "1", "--min-time",
                 "0.05", "--executor", "ray", "--ray-address", cluster, "--store",
                 str(tmp_path / "s.db"), "--json", str(tmp_path / "sweep.json"), "--quiet",
                 token=TOKEN)
    assert sweep.returncode == 0, sweep.stderr[-2000:]
    variants = json.loads((tmp_path / "sweep.json").read_text())["variants"]
    assert all(v["error"] is None for v in variants)
    assert len({w.split(" (")[0] for v in variants for w in v["built_on"]}) == 2
    ddp = _run("distributed", "--workers", "2", "--compression", "none", "--steps", "4",
               "--batch-size", "16", "--device", "cpu", "--no-store", "--executor", "ray",
               "--ray-address", cluster, "--json", str(tmp_path / "ddp.json"), token=TOKEN)
    assert ddp.returncode == 0, ddp.stderr[-2000:]
    (run,) = json.loads((tmp_path / "ddp.json").read_text())["runs"]
    assert run["error"] is None and len(set(run["ranks_on"])) == 2


@pytest.mark.parametrize("token, given", [(None, "no token"), ("0" * 32, "a wrong token")])
def test_without_its_token_a_client_gets_one_line_and_exit_2(cluster, tmp_path, token, given):
    p = _run("run", "--executor", "ray", "--ray-address", cluster, "--store",
             str(tmp_path / "s.db"), "--quiet", token=token, timeout=180)
    assert p.returncode == 2, p.stderr[-2000:]
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr[-2000:]
    assert lines[0].startswith(f"error: the Ray cluster at {cluster} requires its token and "
                               f"this client sent {given}: set RAY_AUTH_TOKEN"), lines[0]
    assert not (tmp_path / "s.db").exists()
