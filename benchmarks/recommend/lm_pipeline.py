"""``recommend`` on a language model: the fastest cell (variant x runtime mode) whose
next-token accuracy is provably within delta points of the baseline's, certified on windows
the search never read.

    recommendation = LMRecommender(request, spec, options)    # refuses bad input
    with store.record(**recommendation.run_fields()) as recorder:
        block, records = recommendation.run(recorder)

- **The search is the grid the flags name**: every variant of the spec (each knob a value or
  a list; ``DEFAULT_GRID`` without a technique flag) under each ``--runtime`` mode. A
  language model's space is a few dozen points, each built in seconds (no training), so it is
  measured whole rather than sampled; there is no budget to end it early.
- **One pass each**: every variant is built and scored paired with the baseline on every
  evaluation window (``LMSweep.score``: one pass over the text per variant), then all cells
  are timed together in interleaved rounds (``LMSweep.time``).
- **The split**: the evaluation windows are split into search and certify windows by
  ``--split-seed`` and ``--certify-fraction`` (``split.make_split``), as test images are.
  Which cells become candidates, and their order, read the search windows and the timing only;
  the certify windows are read once, by the test (``lm_certificate``).
- Quality is scored in eager mode; a cell under ``torch.compile`` shares its variant's
  outcomes (Inductor's fp32 kernels reorder sums, a top-1 flip is rare): each row says so.
"""

from __future__ import annotations

import time

from benchmarks.measure.environment import device_label
from benchmarks.recommend.certificate import SEARCH_ORDER, order_by_search
from benchmarks.recommend.lm_certificate import (
    COUNTED,
    accuracy_on,
    candidates_of,
    cell_ratio,
    cells_of,
    certify_lm,
    change_pts,
    check_objective,
)
from benchmarks.recommend.procedures import SHIPPED
from benchmarks.recommend.sequence import faster_beyond_noise
from benchmarks.recommend.recipe import recipe
from benchmarks.recommend.split import make_split

SCHEMA = 1
REFERENCE_MODE = "eager"  # the baseline as loaded (every spec has it): what speed-ups are against
# Without a technique flag: each language-model technique at the settings that matter.
DEFAULT_GRID = {("int8", "mode"): ("weight-only", "dynamic"), ("int4", "group_size"): (32, 128),
                ("prune", "ratio"): (0.3, 0.5), ("prune", "method"): ("magnitude", "wanda"),
                ("amp", "dtype"): ("bf16",)}
# The image search's flags, which a grid measured whole has no use for: refused by name.
SEARCH_ONLY = {"budget_s": "--budget", "trials": "--trials", "patience": "--patience"}


def check_request(request) -> None:
    """A request a language model's recommend can answer, or one line naming the flag."""
    check_objective(request.objective)
    for name, flag in SEARCH_ONLY.items():
        if getattr(request, name) is not None:
            raise ValueError(f"a language model's recommend measures the whole grid the flags "
                             f"name (no sampler to stop early): drop {flag}, or narrow the "
                             f"grid with the technique flags")
    if request.sampler != "tpe":
        raise ValueError("a language model's recommend measures the whole grid: drop "
                         "--sampler")
    for risk in request.risks:
        if risk.name != "nll":
            raise ValueError(f"a language model's recommend takes --also nll<=X; "
                             f"{risk.text()} is an image model's risk")


class LMRecommender:
    def __init__(self, request, spec, options):
        from benchmarks.run.lm_runner import LMSweep
        check_request(request)
        self.request, self.spec, self.options = request, spec, options
        self.sweep = LMSweep(spec, options)  # the model and text: refused in one line
        n = len(self.sweep.windows.evaluation())
        self.split = make_split(n, request.split_seed, request.certify_fraction)
        if len(self.split.certify) < 2 or len(self.split.search) < 1:
            raise ValueError(f"{n} evaluation windows leave {len(self.split.certify)} to "
                             f"certify: a paired test over windows needs two or more (raise "
                             f"--max-windows, or --certify-fraction)")
        self.reference = f"{spec.variants[0].name}@{REFERENCE_MODE}"
        self.started = time.perf_counter()

    def run_fields(self, owner: str | None = None) -> dict:
        spec = {**self.spec.to_dict(), "lm": self.options.to_dict(),
                "recommend": self.request.to_dict()}
        environment = {**self.sweep.environment, "split": self.split.card(),
                       "recommend": {"margin": self.request.within,
                                     "confidence": self.request.confidence,
                                     "objective": self.request.objective}}
        return dict(model=self.spec.model, dataset=self.spec.dataset, device="cpu",
                    spec=spec, environment=environment, kind="lm",
                    **({"owner": owner} if owner is not None else {}))

    def run(self, recorder, say=None, should_stop=None) -> tuple[dict, list[dict]]:
        """Every cell measured, the candidates chosen on the search windows, certified on the
        certify windows; the block stored as the run's recommendation. Returns (block,
        records)."""
        variants = self.sweep.run(say, on_record=lambda position, v: recorder.add(
            v.to_dict(), position), should_stop=should_stop)
        records = [v.to_dict() for v in variants]
        block = self.certify(records)
        recorder.store.set_recommendation(recorder.run_id, block)
        return block, records

    def certify(self, records: list[dict]) -> dict:
        request, split = self.request, self.split
        cells = cells_of(records)
        if self.reference not in cells:
            raise RuntimeError(f"the baseline's cell {self.reference} failed: nothing to "
                               f"certify against")
        base_record, base_cell = cells[self.reference]
        base = base_record["outcomes"]["baseline"]
        accuracy = accuracy_on(base, split.search)
        margin_pts = request.margin.points(accuracy)
        trials = []
        for name, (record, cell) in cells.items():
            if name == self.reference:
                continue
            ratio, ratio_ci, _ = cell_ratio(cell, base_cell, record, base_record,
                                            request.objective)
            change = change_pts(record["outcomes"]["variant"], base, split.search)
            trials.append({"name": name, "variant": record["name"], "runtime": cell["mode"],
                           "state": "complete", "ratio": ratio, "ratio_ci": ratio_ci,
                           "search_change_pts": round(change, 6),
                           "search_accuracy": accuracy_on(record["outcomes"]["variant"],
                                                          split.search)})
        for record in records:  # a variant or a cell that failed, in one line each
            if not record.get("ok"):
                trials.append({"name": record["name"], "state": "failed",
                               "error": record.get("error")})
                continue
            trials += [{"name": f"{record['name']}@{cell['mode']}", "state": "failed",
                        "error": cell.get("error")}
                       for cell in record.get("cells") or [] if not cell.get("ok")]
        feasible = [t for t in trials if t["state"] == "complete" and t["ratio"] is not None
                    and t["ratio"] > 1 and t["search_change_pts"] >= -margin_pts]
        feasible.sort(key=lambda t: (-t["ratio"], t["name"]))  # the fastest first
        faster = [t for t in feasible if faster_beyond_noise(
            t["ratio"], t.get("ratio_ci"), request.objective, request.min_speedup)]
        not_faster = [{"name": t["name"], "search_ratio": t["ratio"],
                       "search_ratio_ci": t.get("ratio_ci")}
                      for t in feasible[:request.max_candidates] if t not in faster]
        chosen = faster[:request.max_candidates]
        for t in trials:
            t["front"] = t in chosen
        extra = request.risks
        sequence = order_by_search(candidates_of(chosen, records, split, margin_pts,
                                                 self.reference, extra))
        cert = certify_lm(sequence, records, split, margin_pts=margin_pts,
                          margin=request.within, confidence=request.confidence,
                          objective=request.objective, reference=self.reference,
                          procedure=SHIPPED, order_basis=SEARCH_ORDER, extra=extra,
                          not_faster=not_faster, min_speedup=request.min_speedup)
        cert.device = device_label(self.sweep.environment)
        won = next((t for t in trials if t["name"] == cert.winner), None)
        return {
            "schema": SCHEMA, "kind": "lm", "request": request.to_dict(),
            "margin_pts": margin_pts, "reference": self.reference,
            "space": {"variants": [v.name for v in self.spec.variants],
                      "runtimes": list(self.spec.runtimes)},
            "split": split.to_dict(),
            "search": {"trials": trials, "ended": f"the grid the flags name: {len(trials)} "
                       f"cells measured whole", "waves": []},
            "certificate": cert.to_dict(), "references": {}, "final_timing": True,
            "stopped": None, "seconds": round(time.perf_counter() - self.started, 3),
            "budget_s": None,
            "recipe": None if won is None else self._recipe(won),
            "counted": request.objective in COUNTED}

    def _recipe(self, won: dict) -> dict:
        """The winner's recipe (``recipe.recipe``), its command with the text's options."""
        from benchmarks.spec.lm import LMOptions
        variant = next(v for v in self.spec.variants if v.name == won["variant"])
        out = recipe(self.spec, variant, won["runtime"])
        defaults, mine = LMOptions().to_dict(), self.options.to_dict()
        extra = [f"--{name.replace('_', '-')} {mine[name]}" for name in mine
                 if mine[name] != defaults[name] and mine[name] is not None]
        out["command"] = " ".join([out["command"], *extra]) if extra else out["command"]
        out["lm"] = mine
        return out
