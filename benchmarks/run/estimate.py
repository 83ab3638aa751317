"""How long a sweep will take, said before it runs: from earlier runs of the same model and data
set on this machine, and from what the weights cache already holds. Torch-free: the dashboard
shows the estimate as the user moves the knobs.

A variant's time is its training (only when its weights are not cached) plus its measuring
(accuracy, memory, size, latency). For each variant, the estimate takes, in this order:

1. the same variant (same settings, same budgets) in an earlier run: it is cached now, so its
   measuring time, plus its training time if the cache missed back then and not since;
2. variants of the same techniques in earlier runs: their median training and measuring;
3. nothing: the variant counts as unknown and the estimate says so.

Each runtime cell (a variant under another runtime, batch size or thread count) costs what
earlier cells of that runtime cost (their preparing, accuracy and timing), and a run costs,
beyond its rows, what earlier runs of the model and data set spent outside them (loading
data, the shared timing rounds, the report): the median of their wall time less their rows'.
Without either, the variant's eager measuring stands in for a cell, and nothing for the
overhead. The estimate is stored with the run (``environment["estimate"]``) beside what it
took (``actual_seconds``), so History shows its error.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass
from datetime import datetime

# The spec fields that change how long a variant takes or whether its weights are cached.
COMPATIBLE = ("model", "dataset", "batch_size", "epochs", "seed", "lr", "normalize",
              "input_shape", "checkpoint", "device", "fp32", "weights", "labels")
MEASURE_PHASES = ("accuracy", "diagnostics", "memory", "size", "latency")
HISTORY_RUNS = 50
SPEED = "machine speed"


@dataclass
class Estimate:
    variants: int
    seconds: float | None       # None when no variant could be estimated
    known: int                  # variants with an estimate
    runs_used: int              # earlier runs it drew on
    cached: int                 # variants whose weights are expected in the cache
    seeds: int = 1
    cells: int = 0              # runtime cells (rows beyond each variant's first)
    overhead_s: float = 0.0     # the run's time outside its rows, from earlier runs
    floor_s: float = 0.0        # the timing budget alone (min_time_s per row): a lower bound
    # "machine speed": no earlier run of this model and data set here, so the seconds come
    # from this machine's measured speed (benchmarks.run.first_estimate), refined by
    # ``refined_by`` earlier runs of any model.
    source: str = "earlier runs"
    refined_by: int = 0

    def to_dict(self) -> dict:
        """What is stored with the run (``environment["estimate"]``)."""
        return {k: (round(v, 3) if isinstance(v, float) else v)
                for k, v in asdict(self).items()}

    def describe(self) -> str:
        head = f"{self.variants} variant{'s' if self.variants != 1 else ''}"
        if self.seeds > 1:
            head += f" x {self.seeds} seeds"
        if self.cells:
            head += f" + {self.cells} runtime cell{'s' if self.cells != 1 else ''}"
        if self.source == SPEED and self.seconds is not None:
            refined = (f", refined by {self.refined_by} earlier run"
                       f"{'s' if self.refined_by != 1 else ''}" if self.refined_by else "")
            return (f"{head}; about {format_seconds(self.seconds)} (from this machine's "
                    f"measured speed: no earlier run of this model and data set here"
                    f"{refined})")
        if self.seconds is None:
            floor = (f": at least {format_seconds(self.floor_s)} of timing, training on top"
                     if self.floor_s >= 1 else "")
            return (f"{head}; no earlier run of this model and data set here to estimate "
                    f"from{floor}")
        unknown = self.variants - self.known
        tail = f", {unknown} without an estimate" if unknown else ""
        return (f"{head}; about {format_seconds(self.seconds)} (from {self.runs_used} earlier "
                f"run{'s' if self.runs_used != 1 else ''}; {self.cached} cached{tail})")


def shown_kind(run: dict) -> str:
    """A stored run's kind as History and ``history`` list it. A recommend run is stored as
    kind "sweep" (its variants are a sweep's: trends, exports and estimates read it as one,
    filtering on kind="sweep"), so its spec's ``recommend`` request is what names it."""
    kind = run.get("kind") or "sweep"
    if kind == "sweep" and ((run.get("spec") or {}).get("recommend") is not None
                            or run.get("recommendation")):
        return "recommend"
    return kind


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


def _cell_runtime(result: dict) -> str | None:
    """The runtime of a stored runtime cell; None for a variant's own first row."""
    runtime = result.get("runtime") or {}
    # A variant's own first row names itself as its variant; a cell names the one it runs.
    variant = runtime.get("variant")
    return runtime.get("name") if variant and variant != result.get("name") else None


def _row_seconds(result: dict) -> float:
    return sum(float(v or 0.0) for v in ((result.get("raw") or {}).get("phase_s") or {})
               .values())


def actual_seconds(run: dict) -> float | None:
    """A stored run's wall time, started to finished; None while it runs."""
    try:
        return (datetime.fromisoformat(run["finished_at"])
                - datetime.fromisoformat(run["created_at"])).total_seconds()
    except (KeyError, TypeError, ValueError):
        return None


def estimated_seconds(run: dict) -> float | None:
    """The estimate stored with a run when it started (None: an older run, or no earlier run
    here to estimate from)."""
    value = ((run.get("environment") or {}).get("estimate") or {}).get("seconds")
    return float(value) if isinstance(value, (int, float)) else None


def estimate_error(run: dict) -> str:
    """"took 38 s, estimated 4 s (-89%)" for History and ``history``: the estimate's error
    in plain sight; what is missing said as such."""
    took, guess = actual_seconds(run), estimated_seconds(run)
    head = f"took {format_seconds(took)}" if took is not None else "not finished"
    if guess is None:
        return f"{head}, no estimate"
    tail = f" ({100 * (guess - took) / took:+.0f}%)" if took else ""
    return f"{head}, estimated {format_seconds(guess)}{tail}"


def cells_per_variant(spec: dict) -> int:
    """Rows beyond a variant's first: runtimes (eager among them) x batch sizes x threads."""
    runtimes = set(spec.get("runtimes") or ()) | {"eager"}
    return (len(runtimes) * max(1, len(spec.get("eval_batch_sizes") or ()))
            * max(1, len(spec.get("thread_counts") or ()))) - 1


def _times(result: dict) -> tuple[float, float, bool]:
    """(training seconds, measuring seconds, whether it trained) of a stored variant."""
    raw = result.get("raw") or {}
    phases = raw.get("phase_s") or {}
    measure = sum(phases.get(p, 0.0) for p in MEASURE_PHASES)
    trained = bool((raw.get("cache") or {}).get("misses"))
    return phases.get("build", 0.0), measure, trained


def estimate_sweep(spec, history, baseline_cached: bool | None = None,
                   speed: dict | None = None, earlier: list[dict] | None = None) -> Estimate:
    """``spec``: a SweepSpec or its dict; ``history``: a ResultsStore or a list of stored runs
    (``ResultsStore.runs``, newest first). Where no earlier run of the model and data set
    helps, ``speed`` (the worker card's ``speed``) and ``earlier`` (stored sweeps of any model
    here, newest first) give the first estimate (``benchmarks.run.first_estimate``)."""
    spec = spec if isinstance(spec, dict) else spec.to_dict()
    runs = history.runs(limit=HISTORY_RUNS, kind="sweep", model=spec.get("model"),
                        dataset=spec.get("dataset")) if hasattr(history, "runs") \
        else list(history)
    key = _spec_key(spec)
    same_data = [r for r in runs if r.get("kind", "sweep") == "sweep"
                 and r.get("model") == spec.get("model") and r.get("dataset") == spec.get("dataset")]
    exact: dict[str, tuple] = {}
    by_family: dict[str, list] = defaultdict(list)
    by_runtime: dict[str, list] = defaultdict(list)
    overheads = []
    used = set()
    for run in same_data:
        rows = [v for v in run.get("variants") or [] if not v.get("error")]
        for row in rows:
            if _cell_runtime(row):
                by_runtime[_cell_runtime(row)].append(_row_seconds(row))
        wall = actual_seconds(run)
        if wall is not None and rows and run.get("status") == "complete":
            overheads.append(max(0.0, wall - sum(_row_seconds(r) for r in rows)))
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
    per_variant = cells_per_variant(spec)
    runtimes = sorted(set(spec.get("runtimes") or ()) | {"eager"})
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
        total += _cells_seconds(spec, runtimes, by_runtime, measure) if per_variant else 0.0
    overhead = statistics.median(overheads) if overheads and known else 0.0
    n = len(spec.get("variants", []))
    # Every row is timed for min_time_s whatever the machine (split over the rounds): what
    # the first run here can be told, and what a variant without an estimate costs at least.
    row_s = float(spec.get("min_time_s") or 0.0)
    floor = n * (1 + per_variant) * row_s
    total += (n - known) * (1 + per_variant) * row_s
    estimate = Estimate(variants=n, seconds=total + overhead if known else None, known=known,
                        runs_used=len(used), cached=cached, seeds=seeds,
                        cells=per_variant * n, overhead_s=overhead, floor_s=floor)
    if not known and speed:
        from benchmarks.run.first_estimate import first_estimate
        first = first_estimate(spec, speed, earlier or [], baseline_cached)
        if first is not None:
            estimate.seconds, estimate.overhead_s, estimate.refined_by = first
            estimate.source, estimate.known = SPEED, n
    return estimate


def _cells_seconds(spec: dict, runtimes: list[str], by_runtime: dict, measure: float) -> float:
    """One variant's cells: each runtime's median earlier cell (its preparing, accuracy and
    timing), else any runtime's, else the variant's own measuring."""
    batches = max(1, len(spec.get("eval_batch_sizes") or ()))
    threads = max(1, len(spec.get("thread_counts") or ()))
    every = [t for times in by_runtime.values() for t in times]
    seconds = 0.0
    for runtime in runtimes:
        rows = batches * threads - (1 if runtime == "eager" else 0)
        seen = by_runtime.get(runtime) or every
        seconds += rows * (statistics.median(seen) if seen else measure)
    return seconds


@dataclass
class RecommendEstimate:
    """How long a recommendation will take, said before it is queued."""

    trials: int
    seconds: float | None       # None: nothing here to estimate from
    basis: str                  # what the figure was drawn from, said beside it
    budget_s: float | None = None
    at_least: bool = False      # drawn from sweeps: the search's timing comes on top

    def describe(self) -> str:
        if self.seconds is None:
            return (f"{self.trials} trial{'s' if self.trials != 1 else ''}; no earlier run of "
                    f"this model and data set here to estimate the time from")
        figure = f"{'at least' if self.at_least else 'about'} {format_seconds(self.seconds)}"
        if self.budget_s is not None and self.seconds > self.budget_s:
            figure = (f"about {format_seconds(self.budget_s)} (the budget ends the search; "
                      f"{figure} without it)")
        return f"{figure} ({self.basis})"


def _trials_searched(run: dict) -> int:
    search = (run.get("recommendation") or {}).get("search") or {}
    return len(search.get("trials") or []) or int(
        ((run.get("spec") or {}).get("recommend") or {}).get("trials") or 0)


# The search's waves time each trial beside the baseline; the final timing, the candidates
# and the baseline over more rounds (pipeline.FINAL_ROUNDS_MIN and up): in ``min_time_s``s.
WAVE_ROWS, FINAL_ROWS = 2, 1.5


def estimate_recommend(trials: int, history, budget_s: float | None = None, *,
                       spec: dict | None = None, speed: dict | None = None,
                       earlier: list[dict] | None = None, max_candidates: int = 6
                       ) -> RecommendEstimate:
    """``trials`` trials of a recommendation, from ``history`` (stored runs of the same model
    and data set, newest first). Earlier recommendations here give their time per built
    variant (their trials and the baseline), whatever the search tried; without one, the
    sweeps' median variant (its training and measuring) stands in for a trial, and the
    search's own timing rounds and final timing come on top, so it says "at least". Without
    either, ``spec`` (a SweepSpec's dict on the recommendation's data: its variants the kind
    of trial the search starts from) and ``speed`` (the worker card's) give a first estimate
    from the work model (``first_estimate``): the baseline, ``trials`` trials cycling through
    the spec's variants, each wave's timing and the final one."""
    runs = list(history)
    per_variant = []
    for run in runs:
        took, searched = actual_seconds(run), _trials_searched(run)
        if (shown_kind(run) == "recommend" and run.get("status") == "complete" and took
                and searched):
            per_variant.append(took / (searched + 1))
    if per_variant:
        seconds = statistics.median(per_variant) * (trials + 1)
        n = len(per_variant)
        return RecommendEstimate(trials, seconds, f"from {n} earlier recommendation"
                                 f"{'s' if n != 1 else ''} of this model and data set here",
                                 budget_s)
    rows = [_row_seconds(v) for run in runs if shown_kind(run) == "sweep"
            and run.get("status") == "complete" for v in run.get("variants") or []
            if not v.get("error") and not _cell_runtime(v)]
    rows = [s for s in rows if s > 0]
    if not rows:
        return _first_recommend(trials, budget_s, spec, speed, earlier or [], max_candidates)
    seconds = statistics.median(rows) * (trials + 1)
    return RecommendEstimate(trials, seconds, f"{trials + 1} variants at the median of "
                             f"{len(rows)} variants in earlier sweeps of this model and data "
                             f"set here, before the search's timing", budget_s, at_least=True)


def _first_recommend(trials: int, budget_s: float | None, spec: dict | None,
                     speed: dict | None, earlier: list[dict], max_candidates: int
                     ) -> RecommendEstimate:
    """The work model's estimate of a recommendation nothing here has run before."""
    from benchmarks.run.first_estimate import first_estimate
    from optimizers import registry
    # A search's trials are recipes: a technique's control (a student trained alone) is not.
    variants = [v for v in (spec or {}).get("variants") or [] if v.get("techniques") and not (
        len(v["techniques"]) == 1 and registry.control(v["techniques"][0]) is not None)]
    if not spec or not speed or not variants:
        return RecommendEstimate(trials, None, "", budget_s)
    planned = [v for v in (spec.get("variants") or []) if not v.get("techniques")][:1]
    planned += [variants[i % len(variants)] for i in range(trials)]
    found = first_estimate({**spec, "variants": planned, "runtimes": ["eager"]}, speed,
                           earlier)
    if found is None:
        return RecommendEstimate(trials, None, "", budget_s)
    seconds, _, runs = found
    timing = float(spec.get("min_time_s") or 0.0)
    seconds += timing * (WAVE_ROWS * trials + FINAL_ROWS * (min(trials, max_candidates) + 1))
    basis = ("this machine's speed and the work of the baseline and each trial"
             + (f", refined by {runs} earlier sweep{'s' if runs != 1 else ''} here" if runs
                else ""))
    return RecommendEstimate(trials, seconds, basis, budget_s)

