"""Earlier trials, found in the store: a point an earlier recommendation measured costs
nothing the second time.

The weights cache already makes an earlier point's training free; this makes its measuring
free too. A trial is reused only from a recommendation whose *context* was the same: the
baseline's cache key (model, data, normalisation, epochs, seed, learning rate, batch size,
checkpoint, precision), the device, threads and the search's timing budget. Its stored
per-example bits and its ratio against the baseline of its own wave are then what it was
measured to be, so the same command searches the same way (a seeded sampler fed the same
values proposes the same trials) and ends with the same candidates in the same order. The
final timing of those candidates is new, except in a replay (the same command whose search the
wall-time budget ended): that run's final timing is its answer's too, so the warm rerun says
what the cold run said rather than what the timing noise of a second pass picks.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from benchmarks.recommend.search import STOPPED_BEFORE
from benchmarks.report.results import VariantResult

# How many earlier runs of the same model and data are looked at.
LOOKBACK_RUNS = 50


def context_key(sweep, spec, search_rounds: int) -> str:
    """What makes a trial's measurement the same measurement (see the module's docstring)."""
    prepared = getattr(sweep, "prepared", sweep)
    parts = [list(map(str, prepared.base_key(spec.seed))), str(prepared.device),
             prepared.threads, spec.batch_size, spec.min_time_s, spec.min_runs, spec.warmup,
             search_rounds, type(sweep).__name__]
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:20]


@dataclass
class Hit:
    result: VariantResult     # as stored then (renamed by the caller)
    record: dict              # its trial record there
    reference: dict | None    # the baseline of its wave (``waves.reference_of``)
    run_id: str


@dataclass
class ReplayedTiming:
    """The final timing of the run a replay repeats: its baseline and the candidates timed
    with it (as that run stored them), and the run's id."""
    base: VariantResult
    results: dict[str, VariantResult]
    candidates: frozenset[str]    # every candidate that run certified
    run_id: str

    @classmethod
    def of(cls, run: dict, rec: dict) -> "ReplayedTiming | None":
        if not rec.get("final_timing"):
            return None
        variants = run.get("variants") or []
        stored = {v["name"]: v for v in variants}
        base = variants[0] if variants else None  # position 0: the baseline, timed with them
        # A candidate still named in the references was not timed again (its timing failed).
        candidates = [t["name"] for t in (rec.get("certificate") or {}).get("candidates") or []]
        timed = [name for name in candidates if name not in (rec.get("references") or {})]
        if base is None or any(name not in stored for name in timed):
            return None
        return cls(VariantResult.from_dict(base),
                   {name: VariantResult.from_dict(stored[name]) for name in timed},
                   frozenset(candidates), run["run_id"])


class Memo:
    def __init__(self, store=None, key: str | None = None, model: str | None = None,
                 dataset: str | None = None, request: dict | None = None):
        self.hits: dict[str, Hit] = {}
        # Trials successive halving dropped, by hash: their rungs. Replayed into the companion
        # study as they were (the pruner's decisions depend on every earlier report), so a
        # warm rerun prunes what the cold run pruned and the sampler is told the same things.
        self.pruned: dict[str, list] = {}
        # The trials to replay: where the same command (the same request, in the same
        # context) ran before and its search ended on the wall-time budget, that search's
        # length. A warm rerun reuses its trials in seconds and would otherwise spend the
        # budget left on more: its answer would depend on the cache's state.
        self.replay: int | None = None
        # Whether that search's candidates were timed again after it (the budget may have
        # ended before): a replay certifies as it did, or a warm rerun's new final timing
        # answers differently from the cold run's search-round speeds.
        self.replay_final = True
        self.replay_timing: ReplayedTiming | None = None  # that search's final timing
        if store is None or key is None:
            return
        asked = _canonical(request) if request is not None else None
        for summary in store.runs(limit=LOOKBACK_RUNS, model=model, dataset=dataset,
                                  with_variants=False):
            rec = summary.get("recommendation") or {}
            if rec.get("context") != key:
                continue
            search = rec.get("search") or {}
            # Rungs are changes on that request's search split, against its margin: only the
            # same request's pruned trials are replayed.
            same = asked is not None and _canonical(rec.get("request")) == asked
            run = store.run(summary["run_id"])
            if self.replay is None and same and "budget" in str(search.get("ended") or ""):
                measured = sum(1 for t in search.get("trials") or []
                               if t.get("error") != STOPPED_BEFORE)
                # A search the budget ended before any trial has nothing to replay: the
                # same command with the baseline now cached searches.
                if measured:
                    self.replay = measured
                    self.replay_final = bool(rec.get("final_timing"))
                    self.replay_timing = ReplayedTiming.of(run, rec)
            stored = {v["name"]: v for v in run.get("variants") or []}
            waves = (rec.get("search") or {}).get("waves") or []
            for record in (rec.get("search") or {}).get("trials") or []:
                name, digest = record.get("name"), record.get("hash")
                if record.get("state") == "pruned" and record.get("rungs") and same and \
                        digest not in self.pruned:
                    self.pruned[digest] = list(record["rungs"])
                    continue
                if record.get("state") != "complete" or name not in stored or \
                        digest in self.hits:
                    continue
                wave = record.get("wave")
                reference = waves[wave] if wave is not None and wave < len(waves) else None
                self.hits[digest] = Hit(VariantResult.from_dict(stored[name]), record,
                                        reference, summary["run_id"])

    def get(self, digest: str) -> Hit | None:
        return self.hits.get(digest)

    def pruned_rungs(self, digest: str) -> list | None:
        """The rungs of an earlier trial successive halving dropped, if there was one."""
        return self.pruned.get(digest)


def _canonical(request) -> str:
    """A request as stored (JSON), comparable across runs."""
    return json.dumps(request, sort_keys=True, default=str)
