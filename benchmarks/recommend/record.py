"""A recommendation as its readers get it: typed records read from the stored block (the JSON
contract, unchanged), so a view asks ``record.certificate.winner``, never ``block["..."]``.

The block is what ``pipeline.Recommender`` and ``lm_pipeline.LMRecommender`` store; ``Recommended
.from_dict`` reads an image model's and a language model's alike (the language model's names
its speed-ups' reference cell). Torch-free: the dashboard reads it."""

from __future__ import annotations

from dataclasses import dataclass, fields

from benchmarks.recommend.certificate import Certificate


def _known(cls, data: dict) -> dict:
    """The keys of ``data`` that ``cls`` has fields for: a newer writer's extra keys stay in
    the JSON and out of the record."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


@dataclass(frozen=True)
class Trial:
    """One measured (or pruned, or failed) point of the search, as the views show it."""
    name: str
    state: str                          # complete | pruned | failed | duplicate
    ratio: float | None = None          # its objective ratio to the baseline, in the search
    search_change_pts: float | None = None   # its accuracy change on the search split
    front: bool = False                 # on the front of every trial measured
    reused: str | None = None           # the run whose measurement it reused
    error: str | None = None

    @property
    def measured(self) -> bool:
        return self.state == "complete"

    @classmethod
    def from_dict(cls, data: dict) -> "Trial":
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class SplitSizes:
    """The test split's halves: how many examples (or windows) search and certify read."""
    seed: int
    search_size: int
    certify_size: int
    test_examples: int

    @classmethod
    def from_dict(cls, data: dict) -> "SplitSizes":
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class Recommended:
    """A stored recommendation: its certificate, split, search and recipe."""
    certificate: Certificate
    split: SplitSizes
    trials: tuple[Trial, ...]
    ended: str | None                   # why the search ended
    runtimes: tuple[str, ...]           # the runtimes searched
    recipe: dict | None                 # the winner's recipe ({"command", "runtime", ...})
    stopped: str | None                 # why it was stopped early, where it was
    final_timing: bool                  # the candidates timed again with the baseline
    timing_from: str | None             # the run whose final timing a replay replayed
    reference: str | None               # a language model's speed-ups' reference cell
    request: dict | None = None         # what was asked (``RecommendRequest.to_dict``)
    asked_again: bool = False           # its space says how to ask again (``job.asked_again``)

    @property
    def measured(self) -> list[Trial]:
        return [t for t in self.trials if t.measured]

    @property
    def pruned(self) -> list[Trial]:
        return [t for t in self.trials if t.state == "pruned"]

    @property
    def failed(self) -> list[Trial]:
        return [t for t in self.trials if t.state == "failed"]

    @classmethod
    def from_dict(cls, block: dict) -> "Recommended":
        search = block.get("search") or {}
        trials = tuple(Trial.from_dict(t) for t in search.get("trials") or [])
        return cls(
            certificate=Certificate.from_dict(block["certificate"]),
            split=SplitSizes.from_dict(block["split"]), trials=trials,
            ended=search.get("ended"),
            runtimes=tuple((block.get("space") or {}).get("runtimes") or ["eager"]),
            recipe=block.get("recipe"), stopped=block.get("stopped"),
            final_timing=bool(block.get("final_timing")), timing_from=block.get("timing_from"),
            reference=block.get("reference"), request=block.get("request"),
            asked_again=bool((block.get("space") or {}).get("asked")))
