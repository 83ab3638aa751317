"""The search: Optuna, multi-objective, over the search split only.

Each trial is a variant of the space (``space.py``); its two objectives, maximised, are its
accuracy on the *search* split and its objective ratio to the baseline (speed-up, size or
memory ratio), with the margin as a constraint (within delta on the search split: feasible).
The library owns sampling and bookkeeping: a seeded TPE (or NSGA-II) sampler, so the same
command proposes the same trials when fed the same values (``memo.py`` feeds it the values an
earlier run measured), ``study.enqueue_trial`` for the registry's default points first.

Trials are measured a wave at a time through the executors (``waves.py``). A trial whose
chain trains for a budget (``Setting.fidelity``: fine-tuning epochs) is first built at fewer
epochs, where the builds run on this machine: successive halving by Optuna's
``SuccessiveHalvingPruner`` on a companion single-objective study (Optuna prunes only
single-objective studies), whose value at each rung is how far the trial's search-split
accuracy is below the margin (0 when within it, so every trial within the margin goes on);
a pruned trial is never timed.

The search ends at --trials, at the budget (leaving the next wave and the final timing their
time), when it has converged (``patience`` trials in a row, after the sampler's random start,
add nothing to the front of feasible, faster trials: a trial improves when no point of the
front *before it* is at least as good in both objectives), when the space is exhausted, or
when it is stopped; what it found so far is its result. Each trial's ``front`` flag says
whether it is on the front of all the trials measured (kept right after every trial and
recomputed at the end); ``improved``, whether it entered the front when it was measured.
"""

from __future__ import annotations

import logging
import statistics
import time
from dataclasses import asdict, dataclass, field

from benchmarks.recommend.request import STARTUP_TRIALS
from benchmarks.recommend.split import Split, accuracy_at
from benchmarks.recommend.waves import Waves, reference_of
from benchmarks.report.answer import objective_ratio
from benchmarks.report.results import VariantResult
from benchmarks.spec.variant import VariantSpec
from optimizers import registry

SEARCH_ROUNDS = 3          # interleaved rounds per search wave (the final timing takes more)
# Proposals in a row, per trial asked, of points already measured: the space is spent.
DUPLICATES_TO_EXHAUST = 25
HALVING = 2                # successive halving's reduction factor: half go on at each rung
# A trial that failed, or was pruned, is as infeasible as a constraint can say.
INFEASIBLE = [1e6]


@dataclass
class TrialRecord:
    number: int
    name: str
    hash: str
    variant: dict
    params: dict
    state: str = "running"     # complete | pruned | failed | duplicate
    search_accuracy: float | None = None
    search_change_pts: float | None = None
    ratio: float | None = None
    ratio_ci: list[float] | None = None
    feasible: bool | None = None
    front: bool = False        # on the front of every trial measured (``pareto_front``)
    improved: bool = False     # entered the front when measured: it counts against patience
    rungs: list[dict] = field(default_factory=list)
    reused: str | None = None  # the run whose measurement it reused
    wave: int | None = None    # its wave's index in SearchLog.waves
    seconds: float = 0.0
    error: str | None = None
    # Where it ran: its result is that runtime's own (a runtime cell of its variant, named
    # ``variant@runtime``), accuracy and timing alike; ``variant`` stays the recipe.
    runtime: str = "eager"


def trial_identity(variant: VariantSpec, runtime: str) -> tuple[str, str]:
    """(name, hash) of a recipe under a runtime: eager keeps the recipe's own (an earlier
    eager search's trials are found again), another runtime is named as its cell is."""
    if runtime == "eager":
        return variant.name, variant.stable_hash()
    import hashlib
    digest = hashlib.sha256(f"{variant.stable_hash()}@{runtime}".encode()).hexdigest()[:16]
    return f"{variant.name}@{runtime}", digest


@dataclass
class SearchLog:
    trials: list[TrialRecord] = field(default_factory=list)
    results: dict[str, VariantResult] = field(default_factory=dict)  # complete trials
    waves: list[dict] = field(default_factory=list)   # each wave's baseline (reference_of)
    ended: str = ""
    sampler: dict = field(default_factory=dict)
    seconds: float = 0.0

    def front(self) -> list[TrialRecord]:
        """The complete trials within the margin and faster, not dominated in (search
        accuracy, ratio)."""
        return pareto_front(self.trials)

    def refresh_front(self) -> None:
        """Every trial's ``front`` flag from the front of all of them: a later trial can
        push an earlier one off it."""
        on = {id(t) for t in self.front()}
        for t in self.trials:
            t.front = id(t) in on

    def to_dict(self) -> dict:
        return {"trials": [asdict(t) for t in self.trials], "waves": self.waves,
                "ended": self.ended, "sampler": self.sampler, "seconds": round(self.seconds, 3)}


def eligible(t: TrialRecord) -> bool:
    """A trial that can be on the front: measured, within the margin, faster."""
    return t.state == "complete" and bool(t.feasible) and t.ratio is not None and t.ratio > 1


def _covers(o: TrialRecord, t: TrialRecord) -> bool:
    """``o`` is at least as good as ``t`` in both objectives."""
    return o.search_accuracy >= t.search_accuracy and o.ratio >= t.ratio


def pareto_front(trials: list[TrialRecord]) -> list[TrialRecord]:
    """The eligible trials no other eligible trial dominates (at least as good in both of
    (search accuracy, ratio), better in one)."""
    good = [t for t in trials if eligible(t)]
    return [t for t in good if not any(
        o is not t and _covers(o, t)
        and (o.search_accuracy > t.search_accuracy or o.ratio > t.ratio) for o in good)]


def pareto_layers(trials: list[TrialRecord]) -> list[list[TrialRecord]]:
    """The eligible trials in non-dominated layers (NSGA-II's sorting): the front, then the
    front of what is left, and so on."""
    left, layers = [t for t in trials if eligible(t)], []
    while left:
        layer = pareto_front(left)
        layers.append(layer)
        on = {id(t) for t in layer}
        left = [t for t in left if id(t) not in on]
    return layers


def candidate_trials(trials: list[TrialRecord], k: int) -> list[TrialRecord]:
    """What the certificate tests: the front, at most ``k`` of it spread over its speeds; a
    front smaller than that followed by the next non-dominated layers while they fit whole.
    Search-split accuracies a few examples apart are ties within noise: a front of two left
    the certificate one fast point to try, and when that one lost a little on the certify
    split the answer fell back to the slow one, although a near-tie just behind it (as fast,
    one example less accurate in the search) would have passed. Chosen on the search split
    alone, before any certify bit is read, so the error rate holds."""
    layers = pareto_layers(trials)
    front = sorted(layers[0] if layers else [], key=lambda t: (t.ratio, t.name))
    if len(front) > k:
        picks = sorted({round(i * (len(front) - 1) / (k - 1)) for i in range(k)}) \
            if k > 1 else [len(front) - 1]
        return [front[i] for i in picks]
    for layer in layers[1:]:
        if len(front) + len(layer) > k:
            break
        front += layer
    return front


def improves(record: TrialRecord, front: list[TrialRecord]) -> bool:
    """Whether ``record`` adds to ``front`` (the front before it): eligible, and no point of
    that front at least as good in both objectives. A point equal to one already there adds
    nothing, so it does not reset the patience either."""
    return eligible(record) and not any(_covers(o, record) for o in front)


def _quiet_optuna():
    import optuna
    optuna.logging.set_verbosity(logging.WARNING)
    return optuna


def _constraint(trial) -> list[float]:
    return list(trial.user_attrs.get("constraint", INFEASIBLE))


def make_sampler(name: str, seed: int):
    optuna = _quiet_optuna()
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=STARTUP_TRIALS,
                                             constraints_func=_constraint)
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=STARTUP_TRIALS,
                                      constraints_func=_constraint)


STOPPED_BEFORE = "stopped before it was measured"  # a trial the budget cut
NOTHING_SEARCHED = ("the wall-time budget ran out before any trial was measured: nothing was "
                    "searched; give a larger --budget")


class Search:
    def __init__(self, space, request, split: Split, baseline: VariantResult,
                 margin_pts: float, waves: Waves, stop, *, seed: int, memo=None,
                 rung_bits=None, wave_size: int = 1, reserve_s=lambda candidates: 0.0,
                 on_trial=None):
        self.space, self.request, self.split = space, request, split
        self.margin_pts, self.waves, self.stop = margin_pts, waves, stop
        self.memo, self.rung_bits, self.on_trial = memo, rung_bits, on_trial
        self.replay = getattr(memo, "replay", None)
        self.wave_size, self.reserve_s = max(1, wave_size), reserve_s
        self.wave_s: list[float] = []  # each measured wave's seconds: the next one's estimate
        self.base_search = accuracy_at(baseline.scores.correct_bits, baseline.scores.n_test,
                                       split.search)
        self.log = SearchLog(sampler={"name": request.sampler, "seed": seed,
                                      "library": "optuna", "halving": HALVING})
        optuna = _quiet_optuna()
        self.study = optuna.create_study(directions=["maximize", "maximize"],
                                         sampler=make_sampler(request.sampler, seed))
        # Successive halving on a companion study: Optuna prunes single-objective studies.
        self.rungs = optuna.create_study(direction="maximize", pruner=optuna.pruners.
                                         SuccessiveHalvingPruner(min_resource=1,
                                                                 reduction_factor=HALVING))
        starting = space.starting_points()
        for params in starting:
            self.study.enqueue_trial(params, skip_if_exists=True)
        self.seen: dict[str, TrialRecord] = {}
        # Convergence is counted from the first trial the sampler's model proposed.
        self.startup = max(STARTUP_TRIALS, len(starting))

    # -- the loop ------------------------------------------------------------------------

    def run(self) -> SearchLog:
        t0, quiet, duplicates = time.perf_counter(), 0, 0
        new = 0
        try:
            while True:
                ended = self._should_end(new, quiet, duplicates)
                if ended:
                    self.log.ended = ended
                    break
                cap = self.request.max_trials if self.replay is None else self.replay
                wave = self._ask_wave(self.wave_size if cap is None
                                      else min(self.wave_size, cap - new))
                if not wave:  # every proposal was a point already measured
                    duplicates += 1
                    continue
                duplicates = 0
                for record in self._measure(wave):
                    new += 1
                    quiet = 0 if record.improved or new <= self.startup else \
                        quiet + (record.state != "failed")
        except KeyboardInterrupt:
            self.stop.interrupt()
            self.log.ended = self.stop.describe()
        self.log.refresh_front()
        if (self.log.ended or "").startswith("the wall-time budget ran out") and \
                not any(t.state == "complete" for t in self.log.trials):
            self.log.ended = NOTHING_SEARCHED
        self.log.seconds = time.perf_counter() - t0
        return self.log

    def _should_end(self, new: int, quiet: int, duplicates: int) -> str | None:
        r = self.request
        if self.stop():
            return self.stop.describe()
        if r.max_trials is not None and new >= r.max_trials:
            return f"{new} trials, as asked" if r.trials else f"{new} trials (the default)"
        if self.replay is not None:  # the same command's earlier search, trial for trial
            if new >= self.replay:
                return (f"{new} trials: this command's earlier search, replayed from the store "
                        f"(it ended on the wall-time budget; --fresh searches anew)")
            return None
        limit = r.quiet_limit
        if limit is not None and quiet >= limit and any(t.front for t in self.log.trials):
            return f"converged: {quiet} trials in a row found nothing better"
        if duplicates >= 2 or (
                self.space.size() is not None and len(self.seen) >= self.space.size()):
            return "the search space is exhausted: every point was measured"
        # The next wave and the final timing of the front it may leave must fit in what is
        # left: a wave started without its time is cut by the budget, measuring nothing.
        candidates = min(self.request.max_candidates, self.wave_size + len(
            candidate_trials(self.log.trials, self.request.max_candidates)))
        next_wave = statistics.median(self.wave_s) if self.wave_s else 0.0
        if self.stop.soft_end(self.reserve_s(candidates) + next_wave):
            return "the wall-time budget ran out (the rest is kept for the final timing)"
        return None

    def _ask_wave(self, size: int) -> list:
        """Up to ``size`` new trials (a proposal already measured is told its values again
        and not measured twice)."""
        wave = []
        for _ in range(size * DUPLICATES_TO_EXHAUST):
            if len(wave) >= size:
                break
            trial = self.study.ask()
            variant = self.space.suggest(trial)
            runtime = self.space.suggest_runtime(trial)
            name, digest = trial_identity(variant, runtime)
            earlier = self.seen.get(digest) or next(
                (r for _, r, _ in wave if r.hash == digest), None)
            if earlier is not None and earlier.state != "running":
                self._tell(trial, earlier)
                continue
            if earlier is not None:  # asked twice in one wave: measure it once
                self.study.tell(trial, state=_quiet_optuna().trial.TrialState.FAIL)
                continue
            record = TrialRecord(trial.number, name, digest, variant.to_dict(),
                                 dict(trial.params), runtime=runtime)
            wave.append((trial, record, variant))
        return wave

    # -- measuring a wave --------------------------------------------------------------

    def _measure(self, wave: list) -> list[TrialRecord]:
        todo, done = [], []
        for trial, record, variant in wave:
            self.seen[record.hash] = record
            hit = self.memo.get(record.hash) if self.memo is not None else None
            dropped = getattr(self.memo, "pruned_rungs", lambda digest: None)(record.hash)
            if hit is not None:
                self._reuse(record, hit)
            elif dropped is not None:
                record.rungs = list(dropped)
                self._replay_rungs(record.rungs)
                record.state = "pruned"
            elif not self._halve(trial, record, variant):
                record.state = "pruned"
            else:
                todo.append((trial, record, variant))
                continue
            self._finish(trial, record)
            done.append(record)
        if not todo:
            return done
        t0 = time.perf_counter()
        base, results, cut = self.waves.measure([v for _, _, v in todo], SEARCH_ROUNDS,
                                                runtimes=[r.runtime for _, r, _ in todo])
        if base is not None and not cut:
            self.wave_s.append(time.perf_counter() - t0)
        wave_index = None
        if base is not None:
            self.log.waves.append(reference_of(base))
            wave_index = len(self.log.waves) - 1
        for (trial, record, _), result in zip(todo, results):
            record.seconds = time.perf_counter() - t0
            if result is None or base is None:
                # Cut short by a stop: neither measured nor told; the study forgets it.
                record.state = "failed"
                record.error = STOPPED_BEFORE
                self.study.tell(trial, state=_quiet_optuna().trial.TrialState.FAIL)
                self.log.trials.append(record)
                done.append(record)
                continue
            self._score(record, result, base, wave_index)
            self._finish(trial, record)
            done.append(record)
        if cut and not self.stop():
            self.stop.interrupt()
        return done

    def _score(self, record: TrialRecord, result: VariantResult, base: VariantResult,
               wave: int | None) -> None:
        record.wave = wave
        if not result.ok:
            record.state, record.error = "failed", result.error
            return
        record.ratio, record.ratio_ci = objective_ratio(result, base, self.request.objective)
        self._judge(record, result)

    def _judge(self, record: TrialRecord, result: VariantResult) -> None:
        acc = accuracy_at(result.scores.correct_bits, result.scores.n_test, self.split.search)
        if acc is None or self.base_search is None:
            record.state, record.error = "failed", "no per-example accuracy to search on"
            return
        if record.ratio is None:  # e.g. INT8 on the CPU in a CUDA sweep: no ratio across
            record.state = "failed"  # devices (answer.objective_ratio), so no candidate
            record.error = (f"no {self.request.objective} ratio to the baseline (it ran on "
                            f"{result.device}, the baseline elsewhere, or was not timed)")
            return
        record.state = "complete"
        record.search_accuracy = acc
        record.search_change_pts = 100 * (acc - self.base_search)
        record.feasible = record.search_change_pts > -self.margin_pts
        self.log.results[record.name] = result

    def _reuse(self, record: TrialRecord, hit) -> None:
        result = hit.result
        result.name, result.axes = record.name, dict(record.variant.get("axes") or {})
        record.reused = hit.run_id
        record.ratio, record.ratio_ci = hit.record.get("ratio"), hit.record.get("ratio_ci")
        if hit.reference is not None:
            self.log.waves.append(hit.reference)
            record.wave = len(self.log.waves) - 1
        record.rungs = list(hit.record.get("rungs") or [])
        self._replay_rungs(record.rungs)
        self._judge(record, result)

    def _finish(self, trial, record: TrialRecord) -> None:
        self._tell(trial, record)
        # Against the front before it: compared with the front it is already on, no trial
        # ever improved and every search "converged" at its patience.
        record.improved = improves(record, self.log.front())
        if record not in self.log.trials:
            self.log.trials.append(record)
        self.log.refresh_front()
        if self.on_trial is not None:
            self.on_trial(record, self.log.results.get(record.name))

    def _tell(self, trial, record: TrialRecord) -> None:
        states = _quiet_optuna().trial.TrialState
        if record.state == "complete":
            trial.set_user_attr("constraint", [-(record.search_change_pts + self.margin_pts)])
            self.study.tell(trial, [record.search_accuracy, record.ratio])
        elif record.state == "pruned":
            trial.set_user_attr("constraint", INFEASIBLE)
            self.study.tell(trial, state=states.PRUNED)
        else:
            self.study.tell(trial, state=states.FAIL)

    # -- successive halving ------------------------------------------------------------

    def _replay_rungs(self, rungs: list) -> None:
        """An earlier trial's rungs told to the companion study as they were first reported:
        the pruner compares each new trial with every earlier one at the same rung, so a
        replay that skipped them would prune differently and the searches would part."""
        if not rungs or self.rung_bits is None:
            return
        states = _quiet_optuna().trial.TrialState
        companion = self.rungs.ask()
        for rung in rungs:
            companion.report(min(0.0, rung["search_change_pts"] + self.margin_pts),
                             step=rung["epochs"])
            companion.should_prune()  # records the rung it completed, as the first time
        if rungs[-1].get("pruned"):
            self.rungs.tell(companion, state=states.PRUNED)
        else:
            self.rungs.tell(companion, 0.0)

    def _halve(self, trial, record: TrialRecord, variant) -> bool:
        """Build the trial at fewer epochs first (its fidelity settings at 1, 2, 4... below
        its own); False when the companion study's pruner drops it at a rung."""
        rungs = rungs_of(variant)
        if not rungs or self.rung_bits is None:
            return True
        companion = self.rungs.ask()
        for epochs, cheaper in rungs:
            if self.stop():
                break
            bits, n = self.rung_bits(cheaper)
            acc = accuracy_at(bits, n, self.split.search)
            change = 100 * (acc - self.base_search)
            companion.report(min(0.0, change + self.margin_pts), step=epochs)
            pruned = companion.should_prune()
            record.rungs.append({"epochs": epochs, "search_accuracy": acc,
                                 "search_change_pts": change, "pruned": pruned})
            if pruned:
                self.rungs.tell(companion, state=_quiet_optuna().trial.TrialState.PRUNED)
                return False
        self.rungs.tell(companion, 0.0)
        return True


def rungs_of(variant) -> list[tuple[int, object]]:
    """[(epochs, the variant at that many epochs)] for each rung below the trial's own
    training budget (its ``fidelity`` settings above 1): 1, 2, 4... epochs."""
    settings = dict(variant.settings)
    budget = {}
    for name, s in settings.items():
        for field_name, meta, _ in registry.get(name).fields():
            value = getattr(s, field_name)
            if meta.fidelity and isinstance(value, int) and value > 1:
                budget[(name, field_name)] = value
    if not budget:
        return []
    top = max(budget.values())
    levels, e = [], 1
    while e < top:
        levels.append(e)
        e *= HALVING
    out = []
    for epochs in levels:
        cheaper = {}
        for name, s in settings.items():
            changes = {f: min(v, epochs) for (t, f), v in budget.items() if t == name}
            cheaper[name] = registry.get(name).make({**asdict(s), **changes})
        out.append((epochs, VariantSpec(f"{variant.name}@{epochs}", variant.techniques,
                                        cheaper)))
    return out
