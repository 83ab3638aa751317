"""How long a sweep will take, said before it runs: from earlier runs of the same model and data
set on this machine, and from what the weights cache already holds. Torch-free: the dashboard
shows the estimate as the user moves the knobs.

A variant's time is its training (only when its weights are not cached) plus its measuring
(accuracy, memory, size, latency). For each variant, the estimate takes, in this order:

1. the same variant (same settings, same budgets) in an earlier run: it is cached now, so its
   measuring time, plus its training time if the cache missed back then and not since;
2. variants of the same techniques in earlier runs: their median training and measuring;
3. nothing: the variant counts as unknown and the estimate says so.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import dataclass

# The spec fields that change how long a variant takes or whether its weights are cached.
COMPATIBLE = ("model", "dataset", "batch_size", "epochs", "seed", "lr", "normalize",
              "input_shape", "checkpoint", "device", "fp32", "weights", "labels")
MEASURE_PHASES = ("accuracy", "diagnostics", "memory", "size", "latency")
HISTORY_RUNS = 50


@dataclass
class Estimate:
    variants: int
    seconds: float | None       # None when no variant could be estimated
    known: int                  # variants with an estimate
    runs_used: int              # earlier runs it drew on
    cached: int                 # variants whose weights are expected in the cache
    seeds: int = 1

    def describe(self) -> str:
        head = f"{self.variants} variant{'s' if self.variants != 1 else ''}"
        if self.seeds > 1:
            head += f" x {self.seeds} seeds"
        if self.seconds is None:
            return f"{head}; no earlier run of this model and data set here to estimate from"
        unknown = self.variants - self.known
        tail = f", {unknown} without an estimate" if unknown else ""
        return (f"{head}; about {format_seconds(self.seconds)} (from {self.runs_used} earlier "
                f"run{'s' if self.runs_used != 1 else ''}; {self.cached} cached{tail})")


def format_seconds(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _spec_key(spec: dict) -> tuple:
    return tuple(json.dumps(spec.get(k), sort_keys=True, default=str) for k in COMPATIBLE)


def _variant_key(variant: dict) -> str:
    return json.dumps({"techniques": variant.get("techniques"),
                       "settings": variant.get("settings")}, sort_keys=True, default=str)


def _family(techniques: list, settings: dict) -> str:
    """Techniques plus the settings that most change their cost (``Technique.cost_fields``:
    the pruning method)."""
    from optimizers import registry
    settings = settings or {}
    costs = [str(settings.get(t.name, {}).get(f)) for t in registry.techniques()
             for f in t.cost_fields if settings.get(t.name, {}).get(f) is not None]
    return "+".join(techniques or ["baseline"]) + "".join(f":{c}" for c in costs)


def _times(result: dict) -> tuple[float, float, bool]:
    """(training seconds, measuring seconds, whether it trained) of a stored variant."""
    raw = result.get("raw") or {}
    phases = raw.get("phase_s") or {}
    measure = sum(phases.get(p, 0.0) for p in MEASURE_PHASES)
    trained = bool((raw.get("cache") or {}).get("misses"))
    return phases.get("build", 0.0), measure, trained


def estimate_sweep(spec, history, baseline_cached: bool | None = None) -> Estimate:
    """``spec``: a SweepSpec or its dict; ``history``: a ResultsStore or a list of stored runs
    (``ResultsStore.runs``, newest first)."""
    spec = spec if isinstance(spec, dict) else spec.to_dict()
    runs = history.runs(limit=HISTORY_RUNS, kind="sweep", model=spec.get("model"),
                        dataset=spec.get("dataset")) if hasattr(history, "runs") \
        else list(history)
    key = _spec_key(spec)
    same_data = [r for r in runs if r.get("kind", "sweep") == "sweep"
                 and r.get("model") == spec.get("model") and r.get("dataset") == spec.get("dataset")]
    exact: dict[str, tuple] = {}
    by_family: dict[str, list] = defaultdict(list)
    used = set()
    for run in same_data:
        stored = {v.get("name"): v for v in run.get("variants") or []}
        compatible = _spec_key(run.get("spec") or {}) == key
        for v in (run.get("spec") or {}).get("variants", []):
            result = stored.get(v.get("name"))
            if not result or result.get("error"):
                continue
            train, measure, trained = _times(result)
            by_family[_family(v.get("techniques"), v.get("settings"))].append(
                (train if trained else None, measure))
            used.add(run.get("run_id"))
            if compatible:
                vk = _variant_key(v)
                was = exact.get(vk)
                # Keep the trained timing if any earlier run trained it: that is the cost a
                # cache miss would have; the run itself is what makes it cached now.
                exact[vk] = (train if trained else (was[0] if was else None), measure)
    total, known, cached = 0.0, 0, 0
    seeds = int(spec.get("seeds") or 1)
    for v in spec.get("variants", []):
        family = by_family.get(_family(v.get("techniques"), v.get("settings")), [])
        match = exact.get(_variant_key(v))
        is_baseline = not v.get("techniques")
        if is_baseline and baseline_cached is not None:
            in_cache = baseline_cached
        else:
            in_cache = match is not None
        trains = [t for t, _ in family if t is not None]
        if match is not None:
            measure = match[1]
        elif family:
            measure = statistics.median(m for _, m in family)
        else:
            continue
        train = 0.0 if in_cache else (match[0] if match and match[0] is not None
                                      else statistics.median(trains) if trains else 0.0)
        cached += bool(in_cache)
        known += 1
        # Each further seed rebuilds the variant: its training again, and one scoring.
        total += measure + train * seeds + (seeds - 1) * 0.2 * measure
    return Estimate(variants=len(spec.get("variants", [])), seconds=total if known else None,
                    known=known, runs_used=len(used), cached=cached, seeds=seeds)
