"""A real Ray cluster on this machine for the tests and ``make perf``: a head and further
raylets started with ``ray start`` (each one CPU and one bench slot), so several nodes, each
given ``--node-ip-address 127.0.0.1`` (which Ray still binds on every interface:
docs/ray.md); stopped afterwards with nothing of it left running."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))
ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ray_processes() -> list[int]:
    """Every process of a Ray cluster on this machine (raylets, GCS, task workers)."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes()
        except OSError:
            continue
        if b"raylet" in text or b"gcs_server" in text or text.startswith(b"ray::"):
            pids.append(int(cmdline.parent.name))
    return pids


def token_env(token: str | None) -> dict:
    """The environment that asks Ray for token authentication with ``token`` (Ray 2.52+: the
    head, every node and every client must share it), or none of it."""
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token} if token else {}


def wait_for_nodes(address: str, nodes: int, timeout: float = 120, env: dict | None = None
                   ) -> None:
    """Until the cluster reports ``nodes`` active nodes: a raylet just started may not be
    schedulable yet, and a sweep started then puts every build on the head (seen under load)."""
    deadline = time.monotonic() + timeout
    while True:
        p = subprocess.run([RAY, "status", "--address", address], env=env or ENV,
                           capture_output=True, text=True, timeout=60)
        active = p.stdout.split("Active:", 1)[1].split("Pending:", 1)[0] \
            if "Active:" in p.stdout else ""
        if sum(1 for line in active.splitlines() if " node_" in line) >= nodes:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the cluster at {address} has not {nodes} active nodes after "
                               f"{timeout:g} s")
        time.sleep(0.5)


def _node_ports() -> list[str]:
    """Free ports of this machine for a node's agents: several raylets on one address would
    otherwise each take Ray's fixed defaults (the dashboard agent's 52365, the metrics port),
    and a port some other process holds fails a ``ray start`` with nothing in its exit code."""
    return ["--dashboard-agent-listen-port", str(free_port()), "--dashboard-agent-grpc-port",
            str(free_port()), "--metrics-export-port", str(free_port()),
            "--runtime-env-agent-port", str(free_port())]


def _ray_start(args: list[str], env: dict) -> None:
    """``ray start``, tried twice (a port taken between its choice and its use); its own
    output in the error when both fail."""
    for attempt in (1, 2):
        done = subprocess.run([RAY, "start", *args, *_node_ports()], env=env,
                              capture_output=True, text=True, timeout=180)
        if done.returncode == 0:
            return
        if attempt == 2:
            raise RuntimeError(f"ray start {' '.join(args)} failed ({done.returncode}):\n"
                               f"{(done.stdout + done.stderr)[-3000:]}")
        time.sleep(2)


@contextmanager
def local_cluster(nodes: int = 2, object_store_mb: int = 200, token: str | None = None):
    """Yields the head's address; raises if any process of the cluster outlives it. With
    ``token``, every node is started with ``RAY_AUTH_MODE=token`` and that token, so a
    client must send it."""
    env = {**ENV, **token_env(token)}
    port = free_port()
    common = ["--num-cpus", "1", "--resources", '{"bench_slot": 1}', "--object-store-memory",
              str(object_store_mb * 2**20), "--disable-usage-stats", "--node-ip-address",
              "127.0.0.1"]
    _ray_start(["--head", "--port", str(port), "--include-dashboard", "false", *common], env)
    address = f"127.0.0.1:{port}"
    try:
        for _ in range(nodes - 1):
            _ray_start(["--address", address, *common], env)
        wait_for_nodes(address, nodes, env=env)
        yield address
    finally:
        subprocess.run([RAY, "stop", "--force"], env=env, capture_output=True, timeout=120)
        deadline = time.monotonic() + 30
        while ray_processes() and time.monotonic() < deadline:
            time.sleep(0.5)
        left = ray_processes()
        if left:
            raise RuntimeError(f"Ray processes outlived the cluster: {left}")
