"""``compression-bench mcp`` driven by the ``mcp`` SDK's own client, in-process (the SDK's
``Client(server)``), over a real queue, worker and store: the techniques listed, a small
``recommend`` submitted with the owner's token and waited for, its certificate read and
recomputed from the stored data; without the owner's token nothing is submitted or cancelled.
And the command itself, started as an agent would start it, answers on stdio."""

from __future__ import annotations

import json
import os
import secrets
import sys
import time

import pytest

from helpers import ROOT, scaled

pytest.importorskip("mcp")
anyio = pytest.importorskip("anyio")

TOKEN = secrets.token_hex(16)


def _payload(result):
    """A tool's answer as Python data (its structured content, or its text as JSON)."""
    assert not result.is_error, result.content
    if result.structured_content is not None:
        content = result.structured_content
        return content.get("result", content) if isinstance(content, dict) else content
    return json.loads(result.content[0].text)


def test_an_agent_lists_submits_waits_reads_and_recomputes(queue):
    from mcp import Client

    from benchmarks.agents.mcp_server import Engine, build_server, owner_of
    server = build_server(Engine(queue.store.path, TOKEN))

    async def session():
        async with Client(server) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert {"techniques", "submit_recommend", "job", "certificate", "recompute",
                    "cancel"} <= tools
            names = {t["name"] for t in _payload(await client.call_tool("techniques", {}))}
            assert {"prune", "int8", "distill"} <= names
            # Without the owner's token: refused, nothing queued.
            refused = await client.call_tool("submit_recommend", {
                "token": "0" * 32, "techniques": ["int8"], "trials": 2})
            assert refused.is_error and "not the owner's" in refused.content[0].text
            # A margin the data cannot certify: said before anything is queued.
            weak = await client.call_tool("submit_recommend", {
                "token": TOKEN, "dataset": "digits", "within": "1pt", "trials": 2})
            assert weak.is_error and "cannot certify 1 point" in weak.content[0].text
            assert queue.jobs() == []
            job_id = _payload(await client.call_tool("submit_recommend", {
                "token": TOKEN, "model": "seed_cnn", "dataset": "digits", "within": "3pt",
                "techniques": ["int8"], "trials": 2, "epochs": 1}))
            stolen = await client.call_tool("cancel", {"token": "1" * 32, "job_id": job_id})
            assert stolen.is_error
            deadline = time.monotonic() + scaled(600)
            while True:
                state = _payload(await client.call_tool("job", {"job_id": job_id}))
                if state["status"] not in ("queued", "running"):
                    break
                assert time.monotonic() < deadline, state
                await anyio.sleep(1)
            assert state["status"] == "complete", state["error"]
            cert = _payload(await client.call_tool("certificate", {"run_id": state["run_id"]}))
            again = _payload(await client.call_tool("recompute", {"run_id": state["run_id"]}))
            return job_id, cert, again
    job_id, cert, again = anyio.run(session)
    assert again["identical"] and again["certificate"] == cert
    assert cert["procedure"] == "graphical" and "reason" in cert
    assert queue.get(job_id).owner == owner_of(TOKEN) != TOKEN


def test_the_command_serves_on_stdio_and_refuses_without_a_token(tmp_path):
    from mcp import Client, StdioServerParameters

    store = tmp_path / "results.db"
    env = {**os.environ, "COMPRESSION_BENCH_MCP_TOKEN": TOKEN, "PYTHONPATH": str(ROOT)}
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "benchmarks", "mcp", "--store", str(store)], env=env, cwd=str(ROOT))

    async def session():
        async with Client(params) as client:
            return {t.name for t in (await client.list_tools()).tools}
    assert "submit_recommend" in anyio.run(session)
    import subprocess
    done = subprocess.run([sys.executable, "-m", "benchmarks", "mcp", "--store", str(store)],
                          cwd=ROOT, capture_output=True, text=True, timeout=scaled(60),
                          env={k: v for k, v in os.environ.items()
                               if k != "COMPRESSION_BENCH_MCP_TOKEN"})
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "COMPRESSION_BENCH_MCP_TOKEN must hold the owner's token" in line
