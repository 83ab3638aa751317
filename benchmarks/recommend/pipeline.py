"""A recommendation end to end: prepare, check the power, train the baseline, search on the
search split, fix the order, time the candidates again with the baseline, certify on the
certify split once, store it all as a run.

    recommender = Recommender(request, spec, space, store=store)   # refuses bad input
    recommender.prepare_baseline()                                 # power checked again
    with store.record(**recommender.run_fields()) as recorder:
        result = recommender.run(recorder)

Whatever stops it (the budget, Cancel, Ctrl-C: ``stopping.Stop``), ``run`` returns the best
certified variant among what the search found, or says none was: cancelled or interrupted, the
candidates are certified on the bits and timings the search already took, with no further
timing; a budget spent in the search's last wave still leaves the final timing its rounds.

``--budget`` is the whole command's wall time (``Stop(started=...)``): the search ends early
enough to leave the final timing its time, and a budget too short for one trial is refused
with the shortest useful one (``budget_floor_s`` before the data load, from the spec and the
store's history; ``prepare_baseline`` again once the set-up's cost is known).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass

from benchmarks.measure.environment import device_label
from benchmarks.recommend.certificate import SEARCH_ORDER, Certificate, certify, order_by_search
from benchmarks.recommend.procedures import SHIPPED
from benchmarks.recommend.memo import LOOKBACK_RUNS, Memo, context_key
from benchmarks.recommend.power import certifiable_pts, check_power
from benchmarks.recommend.recipe import recipe
from benchmarks.recommend.search import Search, SearchLog
from benchmarks.recommend.sequence import pick
from benchmarks.recommend.split import accuracy_at, make_split
from benchmarks.recommend.stopping import Stop
from benchmarks.recommend.waves import Waves
from benchmarks.report.answer import PAIRED
from benchmarks.report.results import VariantResult
from benchmarks.spec.cancel import Cancelled
from benchmarks.spec.datasets import dataset_entries, dataset_entry
from benchmarks.spec.sweep import SweepSpec
from benchmarks.spec.variant import BASELINE, VariantSpec

SCHEMA = 1
# The final timing's rounds: the bootstrap resamples them, and fewer than six cannot give
# its 95% (the range of n rounds covers their median with probability 1 - 2^(1-n): five 94%).
FINAL_ROUNDS_MIN = 6
# What a command spends beyond its measured phases (the store, the certificate, the report).
OVERHEAD_S = 5.0
# Waves a recommendation times at least: the baseline alone, one trial with the baseline,
# the final timing of one candidate with the baseline; each variant in each for min_time_s.
FLOOR_VARIANT_WAVES = 1 + 2 + 2


# The spec fields that make an earlier recommendation's set-up time this one's.
SETUP_FIELDS = ("epochs", "batch_size", "seed", "lr", "device", "checkpoint", "weights",
                "normalize", "input_shape", "min_time_s", "fp32", "labels")


def budget_floor_s(spec: SweepSpec, elapsed_s: float, history=None) -> tuple[float, bool]:
    """(the least wall time one trial and its final timing can take, known before the data
    load; whether history gave the set-up's time). The timing itself (every variant of every
    wave is timed for ``min_time_s``) comes after the set-up, which takes at least what the
    command has spent already and, where ``history`` (a ResultsStore) holds an earlier
    recommendation of the same model, data and budgets, as long as its fastest set-up (data,
    baseline from the cache)."""
    setup, known = elapsed_s + spec.min_time_s, False  # the baseline measured alone
    if history is not None:
        mine = spec.to_dict()
        earlier = [(run.get("recommendation") or {}).get("setup_s")
                   for run in history.runs(limit=LOOKBACK_RUNS, model=spec.model,
                                           dataset=spec.dataset, with_variants=False)
                   if all((run.get("spec") or {}).get(k) == mine.get(k) for k in SETUP_FIELDS)]
        earlier = [x for x in earlier if isinstance(x, (int, float))]
        if earlier:
            setup, known = max(setup, min(earlier)), True
    return setup + (FLOOR_VARIANT_WAVES - 1) * spec.min_time_s, known


def too_short(budget_s: float, shortest_s: float, what: str, known: bool = True
              ) -> ValueError:
    """The one line refusing a budget, with the shortest useful one (rounded up to 5 s);
    ``known``: False where it is only a lower bound (the set-up did not finish)."""
    shortest = 5 * math.ceil(shortest_s / 5)
    about = "about" if known else "more than"
    return ValueError(f"--budget {budget_s:g}s is too short for one trial: {what}; the "
                      f"shortest useful budget here is {about} {shortest} s "
                      f"(--budget {shortest}s{'' if known else ' or more'})")


def check_labelled(dataset: str) -> None:
    if not dataset_entry(dataset).has_labels:
        labelled = ", ".join(e.menu for e in dataset_entries() if e.has_labels)
        raise ValueError(f"recommend needs a labelled data set to certify accuracy; "
                         f"{dataset} has no labels (use {labelled})")


@dataclass
class Recommendation:
    block: dict                 # what the run stores: request, split, search, certificate
    certificate: Certificate
    log: SearchLog
    run_id: str | None = None


class Recommender:
    def __init__(self, request, spec: SweepSpec, space, *, store=None, cache=None,
                 executor=None, ray_address: str | None = None, should_stop=None,
                 allowed_models_dir=None, allowed_data_dir=None, memory_share=None,
                 on_progress=None, on_trial=None, memo: bool = True,
                 started: float | None = None):
        from benchmarks.run.checks import technique_preflight
        from benchmarks.run.runner import prepare_sweep
        check_labelled(spec.dataset)
        if any(r.name == "nll" for r in request.risks):
            raise ValueError("--also nll<=X bounds a language model's NLL increase per token; "
                             "an image model takes --also agreement>=P%")
        # Chains that cannot apply to this model (distill with no student to distil into)
        # leave the space, said in its description; a technique asked for by name that no
        # chain can hold is refused here.
        space = space.fitted(lambda name, settings, chain:
                             technique_preflight(spec, name, settings, chain))
        if ray_address and space.runtimes != ("eager",):
            # A Ray wave builds every runtime cell of the spec, not only the trials' own.
            raise ValueError("--executor ray searches eager trials only for now: drop "
                             "--runtime, or search on this machine (--executor local)")
        self.request, self.space, self.store = request, space, store
        self.on_trial = on_trial
        self.stop = Stop(should_stop, request.budget_s, started)
        self.spec = dataclasses.replace(spec, variants=(BASELINE,))
        try:
            self.prepared = prepare_sweep(self.spec, cache=cache, executor=executor,
                                          allowed_models_dir=allowed_models_dir,
                                          allowed_data_dir=allowed_data_dir,
                                          should_stop=self.stop, memory_share=memory_share)
        except Cancelled:
            if self.stop.reason != "budget":
                raise
            # The budget, not a cancel: one line naming a budget that can work.
            raise too_short(request.budget_s, self.stop.elapsed_s
                            + FLOOR_VARIANT_WAVES * spec.min_time_s,
                            f"it ran out after {self.stop.elapsed_s:.0f} s, while the data "
                            f"loaded", known=False) from None
        self.split = make_split(len(self.prepared.data.test), request.split_seed,
                                request.certify_fraction)
        n, conf = len(self.split.certify), request.confidence
        # A relative margin is at most its value in points: refused now if even that cannot.
        check_power(request.margin.upper_points, n, conf)
        self.smallest = certifiable_pts(n, conf)
        self.sweep = self.prepared
        if ray_address:
            from benchmarks.executors.ray_executor import RaySweep
            self.sweep = RaySweep(self.prepared, ray_address)
        self.waves = Waves(self.sweep, self.spec, self.stop, on_progress)
        self.context = context_key(self.sweep, self.spec, 3)
        self.use_memo = memo
        self.memo = Memo()
        if store is not None:
            self.attach(store)
        self.base: VariantResult | None = None
        self.margin_pts: float | None = None
        self.positions: dict[str, int] = {}
        self.recorder = None
        self.setup_s: float | None = None  # the command's time until the baseline was measured
        self.timing_from: str | None = None  # the run whose final timing a replay reused

    def attach(self, store) -> None:
        """The results store the run goes to (and earlier trials come from): given once the
        input is known good, so a refusal leaves no store file behind."""
        self.store = store
        if self.use_memo:
            self.memo = Memo(store, self.context, self.spec.model, self.spec.dataset,
                             json.loads(json.dumps(self.request.to_dict(), default=str)))

    @property
    def environment(self) -> dict:
        env = dict(self.sweep.environment)
        env["split"] = self.split.card()
        env["recommend"] = {"margin": self.request.within, "confidence": self.request.confidence,
                            "objective": self.request.objective}
        return env

    def run_fields(self, owner: str | None = None) -> dict:
        """What ``store.record`` takes for this run. Its stored kind stays "sweep" (readers
        that filter kind="sweep" for trends, exports and estimates read its variants as a
        sweep's); the ``recommend`` entry of its spec is what History and ``history`` show
        as its kind (``benchmarks.run.estimate.shown_kind``)."""
        spec = {**self.spec.to_dict(), "recommend": self.request.to_dict()}
        return dict(model=self.spec.model, dataset=self.spec.dataset,
                    device=str(self.sweep.device), spec=spec, environment=self.environment,
                    **({"owner": owner} if owner is not None else {}))

    # -- before the search ---------------------------------------------------------------

    def prepare_baseline(self) -> VariantResult:
        """The baseline trained (or found in the cache) and measured alone: its search-split
        accuracy turns a relative margin into points, checked against the power again."""
        if self.store is not None:
            self.sweep.attach_peaks(self.store)  # the roofline's roofs, as a sweep has them
        base, _, cut = self.waves.measure([], 2)
        if base is None or cut:
            if self.stop.reason == "budget":
                # Nothing searched, nothing stored: the budget was too short (one line).
                raise too_short(self.request.budget_s, self.stop.elapsed_s
                                + (FLOOR_VARIANT_WAVES - 1) * self.spec.min_time_s,
                                f"it ran out after {self.stop.elapsed_s:.0f} s, before the "
                                f"baseline was trained and measured", known=False)
            raise Cancelled()
        if not base.ok:
            raise RuntimeError(f"the baseline failed: {base.error}")
        self.setup_s = self.stop.elapsed_s
        self._check_budget()
        self.base = base
        accuracy = accuracy_at(base.scores.correct_bits, base.scores.n_test, self.split.search)
        self.margin_pts = self.request.margin.points(accuracy)
        check_power(self.margin_pts, len(self.split.certify), self.request.confidence)
        return base

    def _check_budget(self) -> None:
        """Refuse, before any trial, a budget that cannot hold one trial and its final timing
        (measured here: the set-up it took, the baseline's measuring per variant)."""
        budget = self.request.budget_s
        if budget is None:
            return
        one_trial = 2 * self.waves.per_variant_s() * 1.5  # the trial and the baseline
        need = one_trial + self._reserve_s(1)
        if self.stop.remaining_s < need:
            raise too_short(budget, self.setup_s + need,
                            f"the set-up (data, baseline) took {self.setup_s:.0f} s and one "
                            f"trial with its final timing takes about {need:.0f} s more")

    # -- the search, the certificate, the run ---------------------------------------------

    def run(self, recorder) -> Recommendation:
        if self.base is None:
            self.prepare_baseline()
        self.recorder = recorder
        recorder.add(self.base, 0)
        search = Search(self.space, self.request, self.split, self.base, self.margin_pts,
                        self.waves, self.stop, seed=self.spec.seed, memo=self.memo,
                        rung_bits=self._rung_bits if self.sweep is self.prepared else None,
                        wave_size=self._wave_size(), reserve_s=self._reserve_s,
                        on_trial=self._stored)
        log = search.run()
        try:
            cert, references, final = self._certify(log)
        except KeyboardInterrupt:  # during the final timing: certify on the search's own
            self.stop.interrupt()
            cert, references, final = self._certify(log)
        block = self._block(log, cert, references, final)
        self.store_block(block)
        if self.stop.reason in ("cancelled", "interrupted"):
            recorder.finish("interrupted", f"{self.stop.describe()}: the certificate covers "
                                           f"the trials found before")
        return Recommendation(block, cert, log, recorder.run_id)

    def _stored(self, record, result) -> None:
        """Each complete trial joins the run as it is measured (History and the page see
        the search grow)."""
        if result is not None and record.name not in self.positions:
            self.positions[record.name] = len(self.positions) + 1
            self.recorder.add(result, self.positions[record.name])
        if self.on_trial is not None:
            self.on_trial(record)

    def _candidates(self, log: SearchLog) -> tuple[list[dict], list[dict]]:
        """(what the certificate tests, the front members left out as not faster):
        ``sequence.pick``."""
        return pick(log.trials, log.results, self.base, self.split, self.margin_pts,
                    self.request)

    def _certify(self, log: SearchLog) -> tuple[Certificate, dict, bool]:
        """(the certificate, the wave baselines of candidates not timed again, whether they
        were); ``self.timing_from`` names the run whose final timing a replay reused."""
        chosen, not_faster = self._candidates(log)
        sequence = order_by_search(chosen)        # fixed before any certify bit is read
        results = {c["name"]: log.results[c["name"]] for c in chosen}
        by_name = {t.name: t for t in log.trials}
        references = {c["name"]: VariantResult.from_dict(log.waves[by_name[c["name"]].wave])
                      for c in chosen if by_name[c["name"]].wave is not None}
        base, final = self.base, False
        # A replayed search whose run had no final timing (its budget ended first) is
        # certified as that run was, on the search's own rounds.
        replayed_without = self.memo.replay is not None and not self.memo.replay_final
        # The budget does not cut the final timing (the search left it its time; three
        # search rounds cannot give the interval its 95%): Cancel and Ctrl-C do.
        stop = self.stop.unless_budget()
        replayed = self.memo.replay_timing
        if chosen and replayed is not None and \
                {c["name"] for c in chosen} == replayed.candidates:
            # The same command's search replayed: so is its final timing. Timed again, two
            # candidates within noise of each other would be named by this pass's noise.
            base, final = replayed.base, True
            self.timing_from = replayed.run_id
            self.recorder.add(base, 0)
            for c in chosen:
                if c["name"] in replayed.results:
                    results[c["name"]] = replayed.results[c["name"]]
                    references.pop(c["name"], None)
                    self.recorder.add(results[c["name"]], self.positions[c["name"]])
        elif chosen and not stop() and not replayed_without:
            variants = [VariantSpec.from_dict(c["variant"]) for c in chosen]
            rounds = max(FINAL_ROUNDS_MIN, self.spec.timing_rounds)
            new_base, timed, cut = self.waves.measure(
                variants, rounds, stop, runtimes=[c["runtime"] for c in chosen])
            if new_base is not None and not cut:
                base, final = new_base, True
                self.recorder.add(base, 0)
                for c, result in zip(chosen, timed):
                    if result is not None and result.ok:
                        results[c["name"]] = result
                        references.pop(c["name"], None)
                        self.recorder.add(result, self.positions[c["name"]])
        cert = certify(sequence, results, base, self.split, margin_pts=self.margin_pts,
                       margin=self.request.within, confidence=self.request.confidence,
                       objective=self.request.objective, references=references,
                       smallest_margin_pts=self.smallest, procedure=SHIPPED,
                       order_basis=SEARCH_ORDER, extra=self.request.risks,
                       not_faster=not_faster, min_speedup=self.request.min_speedup,
                       statistic=PAIRED)
        cert.device = device_label(self.sweep.environment)
        return cert, {k: v.to_dict() for k, v in references.items()}, final

    def _block(self, log: SearchLog, cert: Certificate, references: dict, final: bool) -> dict:
        won = next((t for t in log.trials if t.name == cert.winner), None)
        winner = None if won is None else VariantSpec.from_dict(won.variant)
        return {
            "schema": SCHEMA, "request": self.request.to_dict(), "margin_pts": self.margin_pts,
            "space": self.space.to_dict(), "split": self.split.to_dict(),
            "context": self.context, "search": log.to_dict(),
            "certificate": cert.to_dict(), "references": references, "final_timing": final,
            "timing_from": self.timing_from,
            "stopped": self.stop.describe(), "seconds": round(self.stop.elapsed_s, 3),
            "setup_s": None if self.setup_s is None else round(self.setup_s, 3),
            "budget_s": self.request.budget_s,
            "recipe": None if winner is None else recipe(self.spec, winner, won.runtime)}

    def store_block(self, block: dict) -> None:
        """The recommendation and the run's spec (every stored trial, so each exports)."""
        by_position = sorted(self.positions.items(), key=lambda kv: kv[1])
        trials = {t["name"]: t for t in block["search"]["trials"]}
        # A trial under another runtime is a cell of its recipe: the spec names the recipe
        # once and the runtimes its cells ran under.
        variants: dict[str, VariantSpec] = {}
        for name, _ in by_position:
            variant = VariantSpec.from_dict(trials[name]["variant"])
            variants.setdefault(variant.name, variant)
        runtimes = tuple(dict.fromkeys(("eager", *(
            trials[name].get("runtime") or "eager" for name, _ in by_position))))
        spec = {**dataclasses.replace(self.spec, variants=(BASELINE, *variants.values()),
                                      runtimes=runtimes).to_dict(),
                "recommend": self.request.to_dict()}
        if self.store is not None:
            self.store.set_recommendation(self.recorder.run_id, block, spec=spec)

    # -- helpers ---------------------------------------------------------------------------

    def _wave_size(self) -> int:
        """One trial per place the executor builds at once."""
        resources = getattr(self.sweep, "resources", None)
        if resources:
            return max(1, int(resources.get("GPU") or resources.get("bench_slot") or 1))
        executor = self.prepared.executor
        return 1 + len(getattr(executor, "devices", []) or [])

    def _reserve_s(self, candidates: int) -> float:
        """What the final timing of ``candidates`` will take: they and the baseline, measured
        again (its rounds cost more than the search's)."""
        per = self.waves.per_variant_s()
        return (candidates + 1) * per * 1.5 + OVERHEAD_S if per else 0.0

    def _rung_bits(self, variant: VariantSpec) -> tuple[str, int]:
        """A cheaper build of a trial scored on the test split, here (successive halving)."""
        from benchmarks.measure.latency import pinned_threads
        from benchmarks.report.stats import pack_bits
        from benchmarks.run.checks import ACCURACY_BATCH
        from optimizers.training import correctness
        p = self.prepared
        with pinned_threads(p.threads):
            outcome = p.build_variant(variant, p.context(lambda *_: None, variant=variant,
                                                         shared={}))
            model = outcome.model
            model.eval()
            right = correctness(model, p.data.batches("test", ACCURACY_BATCH),
                                outcome.device or p.device, outcome.autocast_dtype)
        return pack_bits(right), len(right)
