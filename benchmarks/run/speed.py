"""This machine's speed for training and scoring small networks, measured in a second when the
worker starts, and the work each zoo model does per example on each embedded data set: what
the first estimate of a sweep (``benchmarks.run.first_estimate``) needs before any run here.

The probe trains and scores the embedded default (seed_cnn on digits' 8x8 images) for a few
batches and reports multiply-adds per second for each; a training step counts three times
its forward multiply-adds (forward, and the two products of the backward pass). Small
networks reach a small share of the GEMM roof (launch and Python overheads dominate), so these
rates, not the roofline's peaks, are what a sweep's time follows.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import torch

from benchmarks.measure.macs import mac_census

PROBE_MODEL, PROBE_SHAPE, PROBE_CLASSES = "seed_cnn", (1, 8, 8), 10
PROBE_BATCH = 32          # SweepSpec's default batch size
PROBE_STEPS = 5           # per window, after two steps to warm up
TRAIN_PASSES = 3          # forward + backward (two products per layer) in forward MACs


def forward_macs(model: torch.nn.Module, shape: tuple[int, int, int]) -> int | None:
    """Multiply-adds of one example's forward pass (None: nothing countable ran); a model
    on the meta device is counted from shapes alone."""
    device = next(model.parameters()).device
    census = mac_census(model, torch.zeros(1, *shape, device=device))
    return None if census is None else int(sum(census["macs"].values()))


def _best_step_s(step, steps: int = PROBE_STEPS) -> float:
    for _ in range(2):
        step()
    best = float("inf")
    for _ in range(3):  # the best of three windows: a preemption inflates one, not all
        start = time.perf_counter()
        for _ in range(steps):
            step()
        best = min(best, (time.perf_counter() - start) / steps)
    return best


def probe() -> dict:
    """{"train_macs_per_s", "score_macs_per_s", "probe"}: the rates a training step and a
    scoring pass of the probe model reach here, with the threads this process runs with."""
    from benchmarks.zoo.models import create_model
    torch.manual_seed(0)
    model = create_model(PROBE_MODEL, PROBE_CLASSES, PROBE_SHAPE[0], PROBE_SHAPE[1:])
    macs = forward_macs(model, PROBE_SHAPE)
    x = torch.randn(PROBE_BATCH, *PROBE_SHAPE)
    y = torch.randint(0, PROBE_CLASSES, (PROBE_BATCH,))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()

    def train_step():
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()

    train_s = _best_step_s(train_step)
    model.eval()
    with torch.inference_mode():
        score_s = _best_step_s(lambda: model(x))
    return {"train_macs_per_s": TRAIN_PASSES * macs * PROBE_BATCH / train_s,
            "score_macs_per_s": macs * PROBE_BATCH / score_s,
            "probe": f"{PROBE_MODEL} on {'x'.join(map(str, PROBE_SHAPE))} inputs, batch "
                     f"{PROBE_BATCH}, {torch.get_num_threads()} threads"}


def zoo_work(only: set[str] | None = None) -> dict[str, dict]:
    """{"MODEL@DATASET": {"macs", "train", "test"}} for every zoo model on every embedded
    data set (or the ``only`` entries of them): forward multiply-adds per example and the
    sizes of its training and test splits, known before anything is loaded."""
    from benchmarks.spec.datasets import dataset_entries
    from benchmarks.zoo.datasets import split_sizes, stored_size
    from benchmarks.zoo.models import create_model, list_models
    work = {}
    for entry in dataset_entries():
        names = [n for n in list_models() if only is None or f"{n}@{entry.name}" in only]
        if not entry.embedded or not names:
            continue
        size = stored_size(entry.name)
        train, test = split_sizes(entry.name, size.samples)
        for name in names:
            try:
                with torch.device("meta"):  # shapes only: no weights made
                    model = create_model(name, size.classes, size.shape[0], size.shape[1:])
                macs = forward_macs(model, size.shape)
            except Exception:  # a zoo model that cannot take these images is not estimated
                continue
            if macs:
                work[f"{name}@{entry.name}"] = {"macs": macs, "train": train, "test": test}
    return work


def machine_speed(only: set[str] | None = None) -> dict:
    """The probe's rates and the zoo's work per example (``only``: of those entries; the
    record says whether its work is the whole zoo's). The global random state is left as it
    was: what a worker runs next must not depend on whether it measured its speed first."""
    with torch.random.fork_rng(devices=[]):
        return {**probe(), "work": zoo_work(only), "work_complete": only is None}


def speed_file(cache_dir: str | Path | None = None) -> Path:
    """Where this machine's speed is kept: beside the weights (a machine's, not a store's),
    keyed by host, torch and threads as the roofs are."""
    from benchmarks.spec.folders import default_cache_dir
    name = f"speed-{socket.gethostname()}-{torch.__version__}-{torch.get_num_threads()}t.json"
    return Path(cache_dir or default_cache_dir()) / name.replace("/", "_")


def cached_speed(cache_dir: str | Path | None = None, only: set[str] | None = None) -> dict:
    """This machine's speed: measured the first time it is asked for here (the probe, a
    tenth of a second), then read back; a file that does not read is measured again. The
    zoo's work (a worker's card carries all of it, for the page's estimates: most of a
    second) is counted per entry as it is first asked for: ``only`` ("MODEL@DATASET"
    entries, a sweep's own) or all of it."""
    from benchmarks.spec.atomic import write_text
    path = speed_file(cache_dir)
    speed = None
    try:
        speed = json.loads(path.read_text())
        if not (isinstance(speed, dict) and speed.get("train_macs_per_s")):
            speed = None
    except (OSError, ValueError):
        pass
    # A file written before ``work_complete`` was recorded holds the whole zoo's work.
    if speed is not None and speed.get("work_complete", True):
        return speed
    known = (speed or {}).get("work") or {}
    wanted = None if only is None else only - set(known)  # what is not counted yet
    if speed is None:
        speed = machine_speed(wanted)
    elif wanted is not None and not wanted:
        return speed
    else:  # the rates are kept; the work asked for is added (none: a model outside the zoo)
        with torch.random.fork_rng(devices=[]):
            added = zoo_work(wanted)
        if wanted is not None and not added:
            return speed
        speed = {**speed, "work": {**known, **added}, "work_complete": only is None}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps(speed))
    except OSError:  # a read-only cache: measured again next time
        pass
    return speed


def estimate_here(spec, store, baseline_cached: bool | None = None):
    """The estimate a sweep stores with its run (``benchmarks.run.estimate``): from earlier
    runs of its model and data set in ``store``, else from this machine's speed refined by
    the store's earlier sweeps of any model."""
    from benchmarks.run.estimate import HISTORY_RUNS, estimate_sweep
    estimate = estimate_sweep(spec, store, baseline_cached)
    if estimate.seconds is None:
        earlier = store.runs(limit=HISTORY_RUNS, kind="sweep")
        # The work of this sweep's model and of those the earlier runs refine it by.
        specs = [spec if isinstance(spec, dict) else spec.to_dict()]
        specs += [run.get("spec") or {} for run in earlier]
        speed = cached_speed(only={f"{s.get('model')}@{s.get('dataset')}" for s in specs})
        estimate = estimate_sweep(spec, store, baseline_cached, speed=speed, earlier=earlier)
    return estimate
