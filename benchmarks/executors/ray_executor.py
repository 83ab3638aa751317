"""Sweeps on a Ray cluster: every build that trains is a Ray task, the sweep is measured and
timed by one task on one node, together, in interleaved rounds.

- Every task asks for one GPU on a GPU cluster, or for one ``bench_slot`` (a custom resource,
  one per node, declared at ``ray start``) on CPU nodes: the scheduler, not a lock of ours,
  guarantees that two builds or timings never share a device (Ray's resources; STYLE 16).
- The baseline is trained once, by a task; its weights reach the variants' tasks through Ray's
  object store (an ObjectRef argument), never a shared disk. The trained weights travel the
  same way to the measuring task.
- A task whose worker dies is retried once; then only its variant fails, with one line naming
  the node. Cancel reaches running tasks (``ray.cancel``). If the driver dies, the job and run
  are marked interrupted as for a local sweep.
- The project's code travels with the job (``runtime_env`` ``py_modules``); torch and the
  project's dependencies must be installed on every node, and data sets other than digits and
  synthetic must sit at the same path on every node.

Ray is imported here only: the CLI and the dashboard's worker load this module when the Ray
executor is asked for.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

from benchmarks.executors.tasks import Trained, TrainTask, measure, plan, ship, train
from benchmarks.report.results import VariantResult
from optimizers.errors import described

SLOT = "bench_slot"
NAMESPACE = "compression-bench"
POLL_S = 0.5
PACKAGES = ("benchmarks", "optimizers")


def require_ray() -> None:
    """Ray is an optional part (a wheel may be installed without it): its absence is the
    user's choice to fix, one line, never an ImportError's traceback. The first import of
    Ray here (every path to a cluster starts with this check)."""
    # A cluster started with RAY_AUTH_MODE=token takes only clients that send its token. Ray
    # reads the token from RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH, but only in token mode, and
    # reads the mode when it is imported: a token given is taken as asking for it, before.
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        os.environ.setdefault("RAY_AUTH_MODE", "token")
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ValueError("--executor ray needs Ray, which is not installed here: pip install "
                         "ray[default] (requirements.txt pins its version), or use "
                         "--executor local") from None


def address_or_default(address: str | None) -> str:
    address = address or os.environ.get("RAY_ADDRESS")
    if not address:
        raise ValueError("--executor ray needs --ray-address HOST:PORT (or RAY_ADDRESS): the "
                         "head of a running cluster; this tool never starts one")
    return address


def _reachable(address: str) -> None:
    """A quick TCP probe of the head, so a wrong address is one line in seconds (Ray itself
    would retry for minutes)."""
    import socket
    host, _, port = address.rpartition(":")
    if address.startswith("ray://") or not port.isdigit():
        return  # a client address, or one Ray resolves itself
    try:
        with socket.create_connection((host, int(port)), timeout=5):
            return
    except OSError as exc:
        raise ValueError(f"no Ray cluster answers at {address} ({exc.strerror or exc}); start "
                         f"one with `ray start --head` (see docs/ray.md)"
                         ) from None


def connect(address: str | None) -> dict:
    """Join the cluster at ``address`` as a driver; returns its resources. Refuses, in one
    line, an address with no cluster or a cluster whose nodes declare no bench slot."""
    require_ray()
    address = address_or_default(address)
    _reachable(address)
    # Ray's core logs to stderr from C++; the CLI keeps stderr for progress and one-line
    # errors. A cluster that stops answering is given up on in seconds, not minutes.
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "error")
    os.environ.setdefault("RAY_gcs_rpc_server_connect_timeout_s", "10")
    import ray
    if not ray.is_initialized():
        root = Path(__file__).resolve().parents[2]
        failure = None
        with _stderr_caught() as read:
            try:
                ray.init(address=address, namespace=NAMESPACE, log_to_driver=False,
                         logging_level="ERROR", configure_logging=False,
                         runtime_env={"py_modules": [str(root / p) for p in PACKAGES]})
            except (ConnectionError, RuntimeError, ValueError) as exc:
                failure = exc
            said = read()
        if failure is not None and _refused_token(said):
            given = "a wrong token" if os.environ.get("RAY_AUTH_MODE") == "token" else \
                "no token"
            raise ValueError(f"the Ray cluster at {address} requires its token and this client "
                             f"sent {given}: set RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH, a file "
                             f"holding it) to the token `ray get-auth-token` prints on the "
                             f"head (see docs/ray.md)") from None
        if failure is not None:
            raise ValueError(f"no Ray cluster answers at {address} ({described(failure)}); "
                             f"start one with `ray start --head` (see docs/ray.md)") from None
    resources = ray.cluster_resources()
    if not resources.get(SLOT) and not resources.get("GPU"):
        raise ValueError(f"the Ray cluster at {address} has no GPUs and no {SLOT}: start each "
                         f"node with --resources '{{\"{SLOT}\": 1}}'")
    return resources


def _refused_token(said: str) -> bool:
    """Whether Ray's own output while joining says the cluster refused this client's token
    (its GCS answers "Unauthenticated ... InvalidAuthToken"; the exception only says it could
    not connect)."""
    return "InvalidAuthToken" in said or "Unauthenticated" in said


@contextmanager
def _stderr_caught():
    """Ray's C++ core writes its retries to file descriptor 2 (a line a second while a
    refused driver tries again); the CLI keeps stderr for progress and one-line errors. What
    it wrote meanwhile is held back and readable through the yielded function."""
    with tempfile.TemporaryFile() as caught:
        saved = os.dup(2)
        os.dup2(caught.fileno(), 2)
        try:
            yield lambda: (caught.seek(0), caught.read().decode(errors="replace"))[1]
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def cluster_card() -> dict:
    """The cluster as the dashboard's sidebar shows it: nodes, their GPUs or bench slots, and
    what is free now."""
    import ray
    free = ray.available_resources()
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    return {"nodes": [{"id": n["NodeID"][:12], "address": n.get("NodeManagerAddress"),
                       "cpus": n["Resources"].get("CPU", 0),
                       "gpus": n["Resources"].get("GPU", 0),
                       "slots": n["Resources"].get(SLOT, 0)} for n in nodes],
            "gpus": ray.cluster_resources().get("GPU", 0), "gpus_free": free.get("GPU", 0),
            "slots": ray.cluster_resources().get(SLOT, 0), "slots_free": free.get(SLOT, 0)}


def check_cluster_capacity(ranks: int, device_type: str) -> None:
    """Refuse, in one line, more ranks than the cluster has GPUs or bench slots for."""
    import ray
    have = ray.cluster_resources().get("GPU" if device_type == "cuda" else SLOT, 0)
    if ranks > have:
        what = "GPUs" if device_type == "cuda" else f"{SLOT}s"
        raise ValueError(f"{ranks} workers need {ranks} {what} on the cluster; it has "
                         f"{int(have)}")


def _resources(device_type: str) -> dict:
    return {"num_gpus": 1} if device_type == "cuda" else {"resources": {SLOT: 1}}


def build_nodes(device_type: str) -> list[str]:
    """The alive nodes that can build (a GPU, or a bench slot), in a fixed order: the builds
    are dealt across them in turn."""
    import ray
    need = "GPU" if device_type == "cuda" else SLOT
    return sorted(n["NodeID"] for n in ray.nodes()
                  if n.get("Alive") and n["Resources"].get(need, 0) > 0)


def dealt(index: int, nodes: list[str]) -> dict:
    """The scheduling option of the ``index``-th build: its node in turn, soft (elsewhere
    where that node died or cannot take it). Ray's SPREAD alone left every build on one node
    of two when the other's raylet was slow to report its free slot (a loaded machine)."""
    if not nodes:
        return {"scheduling_strategy": "SPREAD"}
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(
        node_id=nodes[index % len(nodes)], soft=True)}


class RaySweep:
    """A prepared sweep (validated here, on the driver) run on the cluster. It offers what
    the CLI and the queue's worker use of ``PreparedSweep``: ``run``, ``environment``,
    ``device``, ``warnings``, ``cancelled``, ``baseline_cached``."""

    def __init__(self, prepared, address: str | None = None):
        self.prepared = prepared
        self.spec = prepared.spec
        self.device = prepared.device
        self.warnings = prepared.warnings
        self.environment = dict(prepared.environment)
        self.cancelled = False
        self.resources = connect(address)
        self.environment["cluster"] = cluster_card()

    def baseline_cached(self) -> bool | None:
        return None  # the cluster trains it: the local cache says nothing of that

    def attach_peaks(self, store=None) -> None:
        """Nothing here: the timing node measures its own roofs (its environment card)."""

    def run(self, on_progress=None, should_stop=None, on_partial=None, on_environment=None):
        import ray

        from benchmarks.run.phases import reporter
        stop = should_stop or (lambda: False)
        spec = self.spec
        report = reporter(on_progress, len(spec.variants))
        res = _resources(self.device.type)
        spec_dict, files = ship(spec)
        trained = self._train(spec_dict, files, res, report, stop)
        if trained is None:
            return
        refs, done = trained
        failed, built_on = self._outcomes(done)
        good = [refs[t] for t, t_ in done.items() if not t_.error]
        remote_measure = ray.remote(measure).options(num_returns="streaming", max_retries=0,
                                                      **res)
        report("all variants", 0, "measuring on the cluster", 0.0)
        stream = remote_measure.remote(spec_dict, files, failed, built_on, *good)
        yield from self._stream(stream, report, stop, on_partial, on_environment)

    def _train(self, spec_dict, files, res, report, stop):
        """Every build that trains as a Ray task (each seed's baseline first, the variants
        from its weights as an ObjectRef): ({task: ref}, {task: Trained}); None if
        cancelled."""
        import ray
        spec = self.spec
        # Dealt across the nodes in turn: Ray's default would place every variant beside the
        # baseline's weights (data locality) and queue them on that node's one slot.
        nodes = build_nodes(self.device.type)
        train_task = ray.remote(train)

        def remote_train(turn: int):
            return train_task.options(max_retries=1, retry_exceptions=False, **res,
                                      **dealt(turn, nodes))

        def tell(task: TrainTask, phase: str):
            name = spec.variants[task.index].name if task.index else "baseline"
            report(name, task.index if task.index else -1, phase, 0.0)

        tasks = plan(spec, self.prepared.data.labelled, with_baseline=True)
        refs: dict = {}
        for turn, task in enumerate(t for t in tasks if t.index == 0):
            refs[task] = remote_train(turn).remote(spec_dict, task, None, files)
        for turn, task in enumerate((t for t in tasks if t.index > 0), start=1):
            base = refs.get(TrainTask(0, task.seed))
            refs[task] = remote_train(turn).remote(spec_dict, task, base, files)
            tell(task, f"build on the cluster (seed {task.seed})")
        of = {ref: task for task, ref in refs.items()}
        trained: dict[TrainTask, Trained] = {}
        pending = list(refs.values())
        while pending:
            if stop():
                self._cancel(pending)
                return None
            ready, pending = ray.wait(pending, num_returns=1, timeout=POLL_S)
            for ref in ready:
                task = of[ref]
                try:
                    trained[task] = ray.get(ref)
                except ray.exceptions.RayError as exc:  # its worker died twice, or cancelled
                    trained[task] = Trained(task, error=f"{described(exc)} (retried once)")
                done = trained[task]
                tell(task, f"built on {done.where}" if not done.error
                     else f"build failed: {done.error}")
        return refs, trained

    def _outcomes(self, trained: dict) -> tuple[dict, dict]:
        """(variant index -> why its build failed, variant index -> where each seed trained)."""
        spec = self.spec
        failed = {t.index: t_.error for t, t_ in trained.items()
                  if t_.error and t.seed == spec.seed and t.index > 0}
        base_failed = trained.get(TrainTask(0, spec.seed))
        if base_failed is not None and base_failed.error:
            failed.update({i: f"its baseline failed: {base_failed.error}"
                           for i in range(1, len(spec.variants))})
        built_on: dict[int, list[str]] = {}
        for task in sorted(trained, key=lambda t: (t.index, t.seed)):
            built_on.setdefault(task.index, []).append(trained[task].where)
        return failed, built_on

    def _stream(self, stream, report, stop, on_partial, on_environment):
        """The measuring task's stream: the timing node's environment, each variant as it is
        measured (partial), then each fully timed, yielded in the sweep's order."""
        import ray
        results: dict[int, VariantResult] = {}
        while True:
            if stop():
                ray.cancel(stream)
                self.cancelled = True
                break
            ready, _ = ray.wait([stream], timeout=POLL_S)
            if not ready:
                continue
            try:
                item = ray.get(next(stream))
            except StopIteration:
                break
            except ray.exceptions.RayError as exc:
                raise RuntimeError(f"measuring on the cluster failed: {described(exc)}") from None
            kind, index, data = item
            if kind == "environment":  # the timing node's card is the run's
                self.environment = {**index, "cluster": self.environment.get("cluster")}
                if on_environment:
                    on_environment(self.environment)
                continue
            result = VariantResult.from_dict(data)
            if kind == "partial":
                if on_partial:
                    on_partial(index, result)
                report(result.name, index, f"measured on {result.provenance.timed_on}", 1.0)
            else:
                results[index] = result
                report(result.name, index, "done", 1.0)
        for index in sorted(results):
            yield results[index]

    def _cancel(self, pending):
        import ray
        for ref in pending:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # already finished or gone
                pass
        self.cancelled = True
