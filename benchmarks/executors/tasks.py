"""What runs where an executor sends it (another process, another GPU, a Ray node): train one
variant (or one seed's baseline) of a sweep from the weights it is given, and hand back every
weight it trained, keyed like the weights cache. Plain functions over plain data, so a process
pool or Ray can run them anywhere the project is importable."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class TrainTask:
    """Variant ``index`` of the sweep, built with ``seed`` (index 0: the seed's baseline)."""
    index: int
    seed: int

    @property
    def label(self) -> str:
        return f"{self.index}@{self.seed}"


@dataclass
class Trained:
    """What a task hands back: the weights it trained, by cache key, and where it ran; or,
    when it failed, why (one line)."""
    task: TrainTask
    weights: dict = field(default_factory=dict)
    where: str = ""
    seconds: float = 0.0
    error: str | None = None


def merged(given) -> dict:
    """Weights by key from a dict, a Trained, or a list of either (what tasks pass on)."""
    if isinstance(given, Trained):
        return dict(given.weights)
    if isinstance(given, dict):
        return dict(given)
    out: dict = {}
    for part in given or ():
        out.update(merged(part))
    return out


def ship(spec) -> tuple[dict, dict]:
    """(spec as data, the files it names) for a process on another machine: a user's model
    file and checkpoint travel as bytes, under their own names (the cache keys hold their
    names and content hashes, so they stay the same). Data sets are read where the task
    runs: digits and synthetic everywhere, an image folder or CIFAR-10 at the same path on
    every node."""
    from pathlib import Path

    from benchmarks.zoo.models import is_user_model
    files = {}
    if is_user_model(spec.model):
        path, factory = spec.model.rsplit(":", 1)
        files["model"] = (Path(path).name, Path(path).read_bytes(), factory)
    if spec.checkpoint:
        files["checkpoint"] = (Path(spec.checkpoint).name, Path(spec.checkpoint).read_bytes())
    return spec.to_dict(), files


def unship(spec_dict: dict, files: dict, folder) -> dict:
    """The spec with its shipped files written into ``folder`` and pointing there."""
    from pathlib import Path
    spec_dict = dict(spec_dict)
    if "model" in files:
        name, data, factory = files["model"]
        (Path(folder) / name).write_bytes(data)
        spec_dict["model"] = f"{Path(folder) / name}:{factory}"
    if "checkpoint" in files:
        name, data = files["checkpoint"]
        (Path(folder) / name).write_bytes(data)
        spec_dict["checkpoint"] = str(Path(folder) / name)
    return spec_dict


def in_ray() -> bool:
    try:
        import ray
    except ImportError:
        return False
    return ray.is_initialized()


def where_am_i() -> str:
    """This process's place: the Ray node when inside a Ray task, else host and pid."""
    if in_ray():
        import ray
        ctx = ray.get_runtime_context()
        return f"ray node {ctx.get_node_id()[:12]} ({socket.gethostname()})"
    return f"{socket.gethostname()} pid {os.getpid()}"


def plan(spec, labelled: bool = True, with_baseline: bool = False) -> list[TrainTask]:
    """Every build that trains: each trainable variant for each seed and each further seed's
    baseline (the sweep's own baseline too with ``with_baseline``). Seeds only repeat what a
    label can score; a checkpoint's baseline is loaded, never trained."""
    seeds = list(range(spec.seed, spec.seed + (spec.seeds if labelled else 1)))
    trains_baseline = labelled and not spec.checkpoint
    tasks = [TrainTask(0, s) for s in seeds
             if trains_baseline and (with_baseline or s != spec.seed)]
    tasks += [TrainTask(i, s) for s in seeds for i, v in enumerate(spec.variants)
              if i > 0 and v.trains]
    return tasks


def train(spec_dict: dict, task: TrainTask, given=None, files: dict | None = None,
          device: str | None = None) -> Trained:
    """Build ``task``'s variant from the ``given`` weights (its seed's baseline at least),
    training what is missing; return what was trained. A failure comes back as one line (the
    variant fails, not the sweep)."""
    import tempfile

    from benchmarks.measure.latency import pinned_threads
    from benchmarks.run.runner import prepare_sweep
    from benchmarks.run.weights import MemoryCache
    from benchmarks.spec.sweep import SweepSpec
    from optimizers.errors import described
    t0 = time.perf_counter()
    where = where_am_i()
    if isinstance(given, Trained) and given.error:
        return Trained(task, {}, where, 0.0, f"its baseline failed: {given.error}")
    try:
        with tempfile.TemporaryDirectory(prefix="cb-task-") as folder:
            spec = SweepSpec.from_dict(unship(spec_dict, files or {}, folder))
            if device is not None:
                spec = SweepSpec(**{**spec.__dict__, "device": device})
            cache = MemoryCache(merged(given))
            sweep = prepare_sweep(spec, cache=cache)
            # Under Ray, nodes may share a machine: pinned, every node's build would take the
            # same last core (two nodes on two cores trained one after the other).
            with pinned_threads(sweep.threads, pin=not in_ray()):
                baseline = sweep.load_baseline(seed=task.seed)
                if task.index > 0:
                    variant = spec.variants[task.index]
                    ctx = sweep.context(lambda *_: None, seed=task.seed, baseline=baseline,
                                        variant=variant, shared={})
                    sweep.build_variant(variant, ctx, baseline)
    except Exception as exc:
        return Trained(task, {}, where, time.perf_counter() - t0, f"{described(exc)} ({where})")
    return Trained(task, cache.recorded, where, time.perf_counter() - t0)


def measure(spec_dict: dict, files: dict | None, failed: dict | None, built_on: dict | None,
            *given):
    """Build every variant from the ``given`` weights and measure them all together, on this
    node, in the interleaved rounds of an ordinary run; yields ("environment", card, None), then
    ("partial", index, result) as each variant is measured but for its latency, then
    ("result", index, result) (results as dicts)."""
    import tempfile

    from benchmarks.run.runner import prepare_sweep
    from benchmarks.run.weights import MemoryCache
    from benchmarks.spec.sweep import SweepSpec
    where = where_am_i()
    with tempfile.TemporaryDirectory(prefix="cb-measure-") as folder:
        spec = SweepSpec.from_dict(unship(spec_dict, files or {}, folder))
        sweep = prepare_sweep(spec, cache=MemoryCache(merged(given)))
        sweep.failed_builds = dict(failed or {})
        sweep.built_on = dict(built_on or {})
        sweep.attach_peaks(None)  # this node's roofs: the run's environment is this node's
        yield ("environment", {**sweep.environment, "timed_on": where}, None)
        # The sweep runs in a thread so each variant goes back the moment it is measured
        # (``run`` hands partial results to a callback, final ones at the end).
        import queue
        import threading
        events: queue.Queue = queue.Queue()

        def send(kind, index, result):
            result.provenance.timed_on = where
            events.put((kind, index, result.to_dict()))  # a snapshot, taken here

        def work():
            try:
                for index, result in enumerate(sweep.run(
                        on_partial=lambda i, r: send("partial", i, r),
                        on_environment=lambda env: events.put(
                            ("environment", {**env, "timed_on": where}, None)))):
                    send("result", index, result)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the generator
                events.put(("error", exc, None))
            events.put(None)
        threading.Thread(target=work, name="measure", daemon=True).start()
        while (event := events.get()) is not None:
            if event[0] == "error":
                raise event[1]
            yield event
