"""A sweep's estimate before any run of its model and data set here: from this machine's
speed (``benchmarks.run.speed``, measured when the worker starts and carried in its card)
and the work the sweep does, refined by every earlier run on this machine. Torch-free: the
dashboard shows it as the user moves the knobs.

The work: a variant that trains (the baseline, a pruning that fine-tunes, a student, QAT)
runs its epochs over the training split at three times the forward multiply-adds per
example; every row scores the test split once; every row is timed for its budget
(``min_time_s``). Seconds are work over the probe's rates. The probe's small network reaches
a different share of the machine than a given sweep does, and a sweep spends time the model
does not count (loading, calibration, conversions, the report), so the estimate is scaled
by what earlier runs here took against what this model says they would have: the median
ratio of their rows' measured seconds to the model's, over the last ``HISTORY_RUNS``
finished sweeps of any model, recomputed from their specs with today's speed, plus the median
of their time outside their rows (start-up, loading the data, the report). Every run refines
the next first estimate.
"""

from __future__ import annotations

import statistics

TRAIN_PASSES = 3  # a training step's multiply-adds in forward passes (forward and backward)


def _work(speed: dict, model: str, dataset: str) -> dict | None:
    return (speed.get("work") or {}).get(f"{model}@{dataset}")


def _epochs_trained(spec: dict, variant: dict, baseline_cached: bool | None = None) -> int:
    """The epochs a variant trains for (0: it only measures), by its techniques' own word
    (``Technique.trains``), the baseline's at the sweep's epochs unless its weights are
    cached."""
    from optimizers import registry
    techniques = variant.get("techniques") or []
    if not techniques:
        return 0 if baseline_cached else int(spec.get("epochs") or 0)
    settings = variant.get("settings") or {}
    epochs = 0
    for name in techniques:
        given = settings.get(name) or {}
        try:
            technique = registry.get(name)
            trains = technique.trains(technique.settings(**given))
        except (TypeError, ValueError):  # a control (a student trained alone) or an older
            trains = True                # spec's settings: it trains
        if trains:
            own = given.get("finetune_epochs", given.get("epochs"))
            epochs += int(own if own is not None else spec.get("epochs") or 0)
    return epochs


def model_seconds(spec: dict, speed: dict, baseline_cached: bool | None = None
                  ) -> float | None:
    """The speed model's seconds for ``spec`` (a SweepSpec's dict): training, scoring and
    the timing budget of each row; None where the machine's speed or the model's work on
    this data set is not known (a model outside the zoo, a folder of images)."""
    work = _work(speed, spec.get("model"), spec.get("dataset"))
    train_rate, score_rate = speed.get("train_macs_per_s"), speed.get("score_macs_per_s")
    if not work or not train_rate or not score_rate:
        return None
    from benchmarks.run.estimate import cells_per_variant
    rows = 1 + cells_per_variant(spec)
    seeds = int(spec.get("seeds") or 1)
    seconds = 0.0
    for variant in spec.get("variants") or []:
        epochs = _epochs_trained(spec, variant, baseline_cached)
        seconds += seeds * epochs * work["train"] * TRAIN_PASSES * work["macs"] / train_rate
        seconds += seeds * rows * work["test"] * work["macs"] / score_rate
        seconds += rows * float(spec.get("min_time_s") or 0.0)
    return seconds


def _rows_seconds(run: dict) -> float:
    return sum(float(s or 0.0) for v in run.get("variants") or []
               for s in ((v.get("raw") or {}).get("phase_s") or {}).values())


def refinement(speed: dict, earlier_runs: list[dict]) -> tuple[float, float, int]:
    """(factor, overhead seconds, runs): the median of what earlier finished sweeps' rows
    here took over what the speed model says they would have, and the median of their time
    outside their rows; (1.0, 0.0, 0) before any."""
    from benchmarks.run.estimate import actual_seconds
    ratios, overheads = [], []
    for run in earlier_runs:
        if run.get("status") != "complete" or (run.get("kind") or "sweep") != "sweep":
            continue
        took, rows = actual_seconds(run), _rows_seconds(run)
        # The model as that run met it: a baseline that did not train was cached then.
        trained = any(((v.get("raw") or {}).get("cache") or {}).get("misses")
                      for v in run.get("variants") or [] if v.get("name") == "baseline")
        said = model_seconds(run.get("spec") or {}, speed, baseline_cached=not trained)
        if took and rows and said:
            ratios.append(rows / said)
            overheads.append(max(0.0, took - rows))
    if not ratios:
        return 1.0, 0.0, 0
    return statistics.median(ratios), statistics.median(overheads), len(ratios)


def first_estimate(spec: dict, speed: dict | None, earlier_runs: list[dict],
                   baseline_cached: bool | None = None) -> tuple[float, float, int] | None:
    """(seconds, overhead seconds among them, runs it was refined by) for a sweep with no
    earlier run of its model and data set here; None where the speed model cannot say."""
    seconds = model_seconds(spec, speed or {}, baseline_cached)
    if seconds is None:
        return None
    factor, overhead, runs = refinement(speed, earlier_runs)
    return seconds * factor + overhead, overhead, runs
