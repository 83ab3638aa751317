"""From a map to a schedule: one level per group, the most latency saved with the sum of the
cells' predicted accuracy drops within a budget (a multiple-choice knapsack), written as JSON
a person can read and edit, and read back as a variant like any other.

Each group's options are its cells plus "left as it is" (no drop, nothing saved). A cell's
predicted drop is its measured accuracy change on the map (a gain counts as no drop: it buys
no budget); what it saves is its group's share of the baseline's latency times the fraction
of the group's multiply-adds it removes (pruning), or times INT8's measured gain on the
whole model (quantization). Effects are not additive: the schedule's variant is measured,
and its accuracy checked against the baseline with the same paired interval, before anyone
trusts it. Torch-free.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

from optimizers.schedules import SCHEDULE_TECHNIQUES, canonical, digest, parse_schedule

SOLVERS = ("lagrangian", "greedy")


@dataclass(frozen=True)
class Option:
    level: float
    drop: float    # predicted points lost (>= 0)
    saved: float   # predicted milliseconds saved


def options(rows: list[dict], baseline_ms: float) -> dict[str, list[Option]]:
    """{group root: its options, "left as it is" first}, from the map's rows (a row's
    ``saving``: the fraction of the baseline's latency its cell is predicted to save)."""
    out: dict[str, list[Option]] = {}
    for row in rows:
        out.setdefault(row["root"], [Option(0.0, 0.0, 0.0)])
        if row.get("error") is not None or row.get("accuracy_change") is None:
            continue
        out[row["root"]].append(Option(row["level"], max(0.0, -row["accuracy_change"]),
                                       baseline_ms * row.get("saving", 0.0)))
    return out


def composed_saving(rows: list[dict], levels: dict, shares: dict) -> float:
    """The fraction of the baseline's latency a schedule is predicted to save with every
    layer's cuts composed (a layer losing a of its multiply-adds to one group and b to
    another keeps (1 - a)(1 - b) of them), where the knapsack's sum only approximates it."""
    kept: dict[str, float] = {}
    saved = 0.0
    for row in rows:
        if row.get("error") is not None or levels.get(row["root"]) != row["level"]:
            continue
        # A row's modules whose work the cut shrinks: its layers' multiply-adds and the
        # leaves without weights after them (a map of before a ReLU's work: layers only).
        removed = row.get("work_removed_by_module", row.get("macs_removed_by_module"))
        if removed is None or not row["kind"].startswith("prune."):
            saved += row.get("saving", 0.0)
            continue
        for module, fraction in removed.items():
            kept[module] = kept.get(module, 1.0) * (1.0 - fraction)
    return saved + sum(shares.get(m, 0.0) * (1.0 - k) for m, k in kept.items())


def _total(choice: dict[str, Option]) -> tuple[float, float]:
    return (sum(o.drop for o in choice.values()), sum(o.saved for o in choice.values()))


def greedy(table: dict[str, list[Option]], budget: float) -> dict[str, Option]:
    """From every group left as it is, take the upgrade (a group to one of its options that
    saves more) with the most saved per point of drop that still fits, until none does."""
    choice = {root: opts[0] for root, opts in table.items()}
    while True:
        spent = _total(choice)[0]
        moves = []
        for root, opts in table.items():
            now = choice[root]
            for o in opts:
                gain, cost = o.saved - now.saved, o.drop - now.drop
                if gain > 0 and spent + cost <= budget + 1e-12:
                    moves.append((math.inf if cost <= 0 else gain / cost, gain, root, o))
        if not moves:
            return choice
        _, _, root, option = max(moves, key=lambda m: (m[0], m[1], m[2]))
        choice[root] = option


def lagrangian(table: dict[str, list[Option]], budget: float) -> dict[str, Option]:
    """Price a point of accuracy at lambda and let every group take the option with the
    most saved minus lambda times its drop; at every price where some group changes its
    mind, the choice is made to fit (``_repair``: the cheapest downgrades) and what budget
    is left filled (``_fill``); the best of them wins. The sweep alone only reaches the
    corners of the hull; the repair reaches a better choice between them."""
    prices = {0.0}
    for opts in table.values():
        for a in opts:
            for b in opts:
                if b.drop > a.drop and b.saved > a.saved:
                    prices.add((b.saved - a.saved) / (b.drop - a.drop))
    best = {root: opts[0] for root, opts in table.items()}
    for price in sorted(prices, reverse=True):
        choice = {root: max(opts, key=lambda o: (o.saved - price * o.drop, -o.drop))
                  for root, opts in table.items()}
        choice = _fill(table, _repair(table, choice, budget), budget)
        if _total(choice)[1] > _total(best)[1] + 1e-12:
            best = choice
    return best


def _repair(table: dict[str, list[Option]], choice: dict[str, Option], budget: float
            ) -> dict[str, Option]:
    """Downgrade groups until ``choice`` fits: the single downgrade that fits losing the
    least saving, else the one losing least per point it frees, again."""
    fixed = dict(choice)
    while _total(fixed)[0] > budget + 1e-12:
        over = _total(fixed)[0] - budget
        moves = [(fixed[r].saved - o.saved, fixed[r].drop - o.drop, r, o)
                 for r, opts in table.items() for o in opts if o.drop < fixed[r].drop]
        fitting = [m for m in moves if m[1] >= over - 1e-12]
        if fitting:
            _, _, root, option = min(fitting, key=lambda m: (m[0], -m[1], m[2]))
        else:
            _, _, root, option = min(moves, key=lambda m: (m[0] / m[1], m[2]))
        fixed[root] = option
    return fixed


def _fill(table: dict[str, list[Option]], choice: dict[str, Option], budget: float
          ) -> dict[str, Option]:
    """Greedy upgrades from ``choice`` within what budget is left."""
    filled = dict(choice)
    while True:
        spent = _total(filled)[0]
        moves = [(o.saved - filled[r].saved, r, o) for r, opts in table.items() for o in opts
                 if o.saved > filled[r].saved and spent + o.drop - filled[r].drop
                 <= budget + 1e-12]
        if not moves:
            return filled
        _, root, option = max(moves, key=lambda m: (m[0], m[1]))
        filled[root] = option


def solve(table: dict[str, list[Option]], budget: float, solver: str = "lagrangian"
          ) -> dict[str, Option]:
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {', '.join(SOLVERS)}; got {solver!r}")
    if not budget > 0:
        raise ValueError(f"a schedule's drop budget must be above 0 points; got {budget!r}")
    return lagrangian(table, budget) if solver == "lagrangian" else greedy(table, budget)


def build_schedule(rows: list[dict], *, model: str, technique: str, budget_pts: float,
                   baseline_ms: float, objective: str = "p50", solver: str = "lagrangian",
                   shares: dict | None = None, finetune_epochs: int | None = None,
                   **notes) -> dict:
    """The schedule document: every group's level (0: left as it is) and what the map
    predicts for it (``notes``, the data set or the map's run, travel with it). With the
    layers' latency ``shares``, the predicted saving composes the cuts of each layer.
    ``finetune_epochs``: the fine-tuning the map's cells had, which the prediction assumes;
    the schedule's variant applies the same (``schedule_variant``)."""
    table = options(rows, baseline_ms)
    choice = solve(table, budget_pts, solver)
    drop, saved = _total(choice)
    levels = {root: _level(technique, o.level) for root, o in choice.items()}
    if shares is not None:
        saved = baseline_ms * composed_saving(rows, {r: o.level for r, o in choice.items()},
                                              shares)
    if finetune_epochs is not None and technique.startswith("prune."):
        notes["finetune_epochs"] = finetune_epochs
    doc = {"model": model, "technique": technique, "groups": levels,
           "objective": objective, "max_drop_pts": budget_pts, "solver": solver,
           "predicted": {"accuracy_change_pts": -drop if drop else 0.0, "saved_ms": saved,
                         f"{objective}_ms": baseline_ms - saved,
                         "baseline_ms": baseline_ms,
                         "saving": saved / baseline_ms if baseline_ms else None},
           "created_at": time.strftime("%Y-%m-%dT%H:%M:%S"), **notes}
    parse_schedule(doc)
    return doc


def _level(technique: str, level: float):
    return int(level) if technique.startswith("int8.") else level


def write_schedule(path: str | Path, doc: dict) -> None:
    Path(path).write_text(json.dumps(doc, indent=2) + "\n")


def read_schedule(path: str | Path) -> dict:
    """A schedule file, checked for its shape; ValueError names the file."""
    try:
        text = Path(path).expanduser().read_text()
    except OSError as exc:
        raise ValueError(f"--schedule {path}: cannot read it ({exc.strerror})") from None
    try:
        return parse_schedule(text)
    except ValueError as exc:
        raise ValueError(f"--schedule {path}: {exc}") from None


def schedule_finetune_epochs(doc: dict) -> int | None:
    """The fine-tuning a pruning schedule's prediction assumed (its map's cells'), None for
    INT8 or a schedule written before it was recorded."""
    epochs = doc.get("finetune_epochs")
    return epochs if isinstance(epochs, int) and not isinstance(epochs, bool) else None


def schedule_variant(doc: dict, finetune_epochs: int | None = None):
    """The schedule as a variant like any other: channel or L1 pruning with its per-group
    ratios and the fine-tuning its prediction assumed (the schedule's ``finetune_epochs``;
    the usual one for a schedule that does not say, ``finetune_epochs`` where the caller
    asks for another), or INT8 with its float groups kept."""
    if finetune_epochs is None:
        finetune_epochs = schedule_finetune_epochs(doc)
    from benchmarks.spec.variant import VariantSpec
    from optimizers.settings import Int8Settings, PruneSettings
    technique, field_name, value = SCHEDULE_TECHNIQUES[doc["technique"]]
    text = canonical(doc)
    name = f"{technique}-{value}-schedule-{digest(doc)}"
    if technique == "prune":
        extra = {} if finetune_epochs is None else {"finetune_epochs": finetune_epochs}
        settings = PruneSettings(0.0, value, schedule=text, **extra)
    else:
        settings = Int8Settings(value, schedule=text)
    return VariantSpec(name, (technique,), {technique: settings})


def verification_variants(doc: dict, levels: list[float]) -> list:
    """What a schedule's verification sweep runs beside the baseline: the schedule's
    variant and, for pruning, uniform pruning at the map's ``levels`` with the same
    fine-tuning (so the comparison is of the schedule, not of the epochs); for INT8 the
    whole model quantized."""
    from benchmarks.spec.variant import VariantSpec
    from optimizers.settings import Int8Settings, PruneSettings
    technique, _, value = SCHEDULE_TECHNIQUES[doc["technique"]]
    scheduled = schedule_variant(doc)
    if technique != "prune":
        return [scheduled, VariantSpec(f"int8-{value}", ("int8",),
                                       {"int8": Int8Settings(value)})]
    epochs = scheduled.prune.finetune_epochs
    return [scheduled] + [
        VariantSpec(f"prune-{value}-{level:g}", ("prune",),
                    {"prune": PruneSettings(level, value, epochs)}) for level in levels]
