"""``compression-bench mcp``: the engine for an agent, over the Model Context Protocol (the
``mcp`` SDK's ``MCPServer``), on stdio.

An agent gets what a person gets from the dashboard, through the same queue and store: the
techniques and their knobs, a ``recommend`` job submitted (its payload built and checked by
``benchmarks.recommend.job.payload``, as the Recommend panel's is), the job's state, the stored
certificate, its recomputation from the stored bits alone, and Cancel. The worker that runs the
job is the queue's own (started on demand, as for the dashboard): nothing runs in this process.

Who may submit and cancel: the server is started with the owner's token
(``COMPRESSION_BENCH_MCP_TOKEN``); ``submit_recommend`` and ``cancel`` take a ``token`` that must
be it (compared in constant time), and the jobs are the token's owner's (``mcp:`` and a digest
of the token), so a client without it can neither submit nor cancel. Reading is open to any
client of the server, as a run's shared link is to a colleague.
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

from benchmarks.recommend.certificate import recompute
from benchmarks.recommend.job import payload
from benchmarks.recommend.power import data_power
from benchmarks.recommend.request import RecommendRequest
from benchmarks.report.document import RunReport
from benchmarks.service.queue import JobQueue
from benchmarks.spec.sweep import SweepSpec
from optimizers import registry

TOKEN_ENV = "COMPRESSION_BENCH_MCP_TOKEN"
MIN_TOKEN_CHARS = 16


def owner_of(token: str) -> str:
    """The owner a token's jobs are recorded under (never the token itself)."""
    return "mcp:" + hashlib.sha256(token.encode()).hexdigest()[:24]


class Engine:
    """The tools' work, free of the protocol (the tests call it directly too)."""

    def __init__(self, store: Path, token: str):
        if len(token or "") < MIN_TOKEN_CHARS:
            raise ValueError(f"{TOKEN_ENV} must hold the owner's token, at least "
                             f"{MIN_TOKEN_CHARS} characters (python -c 'import secrets; "
                             f"print(secrets.token_hex(16))')")
        self.queue = JobQueue(Path(store))
        self._token = token

    def _owner(self, token: str) -> str:
        if not hmac.compare_digest(str(token or "").encode(), self._token.encode()):
            raise PermissionError("refused: this token is not the owner's (the server's "
                                  f"{TOKEN_ENV})")
        return owner_of(token)

    # -- reading -------------------------------------------------------------------------

    @staticmethod
    def techniques() -> list[dict]:
        """Each image technique: its name, what it does, and its knobs with their defaults."""
        out = []
        for t in registry.techniques("image"):
            knobs = [{"name": name, "default": None if default is None else str(default)}
                     for name, _, default in t.fields()]
            out.append({"name": t.name, "description": t.description, "knobs": knobs})
        return out

    def job(self, job_id: str) -> dict:
        job = self.queue.get(job_id)
        if job is None:
            raise ValueError(f"no job {job_id!r} in this store")
        return {"job_id": job.job_id, "kind": job.kind, "status": job.status,
                "run_id": job.run_id, "error": job.error}

    def _run(self, run_id: str) -> dict:
        run = self.queue.store.run(run_id)
        if run is None or not run.get("recommendation"):
            raise ValueError(f"run {run_id!r} holds no recommendation")
        return run

    def certificate(self, run_id: str) -> dict:
        """The stored certificate, as the run recorded it."""
        return self._run(run_id)["recommendation"]["certificate"]

    def recompute(self, run_id: str) -> dict:
        """The certificate redone from the stored bits, classes and timing rounds alone, and
        whether it is the stored one."""
        run = self._run(run_id)
        again = recompute(RunReport.from_stored(run).document()).to_dict()
        return {"identical": again == run["recommendation"]["certificate"],
                "certificate": again}

    # -- acting, with the owner's token ---------------------------------------------------

    def submit_recommend(self, token: str, model: str = "seed_cnn", dataset: str = "digits",
                         within: str = "1pt", trials: int = 8,
                         techniques: list[str] | None = None, epochs: int = 1) -> str:
        """A ``recommend`` job, as the Recommend panel submits it; its job id."""
        owner = self._owner(token)
        spec = SweepSpec(model=model, dataset=dataset, epochs=epochs)
        request = RecommendRequest(within=within, trials=trials)
        # What the worker would refuse once the data is loaded is refused here, as the
        # Recommend panel does before its click: a margin the certify split cannot hold.
        power = data_power(dataset, within, request.confidence, request.certify_fraction)
        if power.refused:
            raise ValueError(power.sentence())
        job = payload(spec, request, {}, tuple(techniques or ()))
        self.queue.ensure_worker("cpu")
        return self.queue.submit("recommend", job, session=owner, owner=owner)

    def cancel(self, token: str, job_id: str) -> bool:
        return self.queue.cancel(job_id, by=self._owner(token))


def _said(work):
    """A tool's refusal (a bad argument, a token not the owner's, a store's one-line error)
    as the SDK's ``ToolError``: the client reads the line, the server logs no traceback."""
    from mcp.server.mcpserver.exceptions import ToolError  # optional: only this command
    try:
        return work()
    except (ValueError, PermissionError, KeyError) as exc:
        raise ToolError(str(exc)) from None


def build_server(engine: Engine):
    """The MCP server over ``engine``: one tool per method."""
    from mcp.server.mcpserver import MCPServer  # optional: installed for this command alone
    server = MCPServer("compression-bench", instructions=(
        "Model compression, measured: list the techniques, submit a certified recommendation "
        "(the fastest variant provably within a margin of the baseline), wait for its job, "
        "read and recompute its certificate. Submitting and cancelling need the owner's "
        "token."))

    @server.tool()
    def techniques() -> list[dict]:
        """The image techniques a recommendation searches, with their knobs' defaults."""
        return _said(engine.techniques)

    @server.tool()
    def submit_recommend(token: str, model: str = "seed_cnn", dataset: str = "digits",
                         within: str = "1pt", trials: int = 8,
                         techniques: list[str] | None = None, epochs: int = 1) -> str:
        """Queue a recommendation (the fastest variant within ``within`` of the baseline,
        certified); returns its job id. ``token``: the owner's."""
        return _said(lambda: engine.submit_recommend(token, model, dataset, within, trials,
                                                     techniques, epochs))

    @server.tool()
    def job(job_id: str) -> dict:
        """A job's status, and its run id once it has one."""
        return _said(lambda: engine.job(job_id))

    @server.tool()
    def certificate(run_id: str) -> dict:
        """A recommendation's stored certificate."""
        return _said(lambda: engine.certificate(run_id))

    @server.tool()
    def recompute(run_id: str) -> dict:
        """The certificate redone from the stored data alone, and whether it matches."""
        return _said(lambda: engine.recompute(run_id))

    @server.tool()
    def cancel(token: str, job_id: str) -> bool:
        """Cancel a job; ``token``: its owner's."""
        return _said(lambda: engine.cancel(token, job_id))

    return server
