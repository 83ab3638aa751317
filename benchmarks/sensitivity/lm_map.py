"""A language model's sensitivity map: which of its decoder's layers, or which projection
kinds, tolerate a technique (INT4 in groups, INT8, pruning by magnitude or Wanda).

A *group* is a set of the decoder's linear layers (``optimizers.lm.decoder_linears``): by
``layer``, decoder layer i's attention and MLP projections; by ``projection``, one kind
(``q_proj``, ..., ``down_proj``) in every layer. Each cell changes one group at one level (the
technique through the registry's ``lm_apply`` with ``only=`` the group, the rest float and
dense) and is scored paired with the baseline on the same screening windows
(``lm_quality.evaluate_pair``): the change in NLL per token with its bootstrap interval over
windows, next-token accuracy's change, agreement and KL. Rows most sensitive first (the
largest NLL change); a change whose interval holds zero is within noise, not shown harmless.
The screening windows are a seeded share (``--subset``) of the evaluation windows, never the
calibration ones Wanda reads. Each row keeps its per-window outcomes: its figures recompute.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

CELL_WORDS = {"int4": "INT4", "int8.weight-only": "INT8 weight-only",
              "int8.dynamic": "INT8 W8A8 dynamic", "prune.magnitude": "magnitude pruning",
              "prune.wanda": "Wanda pruning"}
_INDEX = re.compile(r"\.(\d+)\.")


def lm_groups(names, by: str) -> dict[str, list[str]]:
    """{group: layer names} in model order: "layer 3" (the decoder layer's index in the name)
    or "q_proj" (the name's last part)."""
    groups: dict[str, list[str]] = {}
    for name in names:
        if by == "layer":
            found = _INDEX.search(f".{name}.")
            key = f"layer {found.group(1)}" if found else "other"
        else:
            key = name.rpartition(".")[2]
        groups.setdefault(key, []).append(name)
    return groups


def technique_settings(technique: str, level: float, group_size: int):
    """(the registry's technique name, its settings) of one cell."""
    from optimizers.settings import Int4Settings, Int8Settings, PruneSettings
    if technique == "int4":
        return "int4", Int4Settings(group_size=group_size)
    if technique.startswith("int8."):
        return "int8", Int8Settings(mode=technique.partition(".")[2])
    return "prune", PruneSettings(ratio=level, method=technique.partition(".")[2])


def screening_windows(evaluation: tuple[int, ...], share: float, seed: int) -> list[int]:
    """A seeded ``share`` of the evaluation windows (at least two), ascending."""
    k = max(2, min(len(evaluation), round(share * len(evaluation))))
    return sorted(random.Random(seed).sample(list(evaluation), k))


@dataclass
class LMMap:
    technique: str
    by: str
    levels: tuple[float, ...]
    windows: int
    tokens: int
    rows: list[dict] = field(default_factory=list)
    seconds: float = 0.0

    def table(self) -> str:
        heads = ("group", "layers", "level", "dNLL/token [95%]", "within noise", "d acc pts",
                 "agreement", "KL mean")
        lines = [heads]
        for r in self.rows:
            if r.get("error"):
                lines.append((r["group"], str(r["layers"]), _level(r), f"failed: {r['error']}",
                              "", "", "", ""))
                continue
            lo, hi = r["delta_nll_interval"]
            lines.append((r["group"], str(r["layers"]), _level(r),
                          f"{r['delta_nll']:+.4f} [{lo:+.4f}, {hi:+.4f}]",
                          "yes" if r["within_noise"] else "no",
                          f"{r['delta_accuracy_pts']:+.2f}", f"{r['agreement']:.1%}",
                          f"{r['kl_mean']:.4f}"))
        widths = [max(len(row[i]) for row in lines) for i in range(len(heads))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
                         for row in lines)

    def summary(self) -> dict:
        return {"technique": self.technique, "by": self.by, "levels": list(self.levels),
                "windows": self.windows, "tokens": self.tokens, "cells": len(self.rows),
                "seconds": round(self.seconds, 3), "kind": "lm"}

    def document(self, environment: dict) -> dict:
        return {"kind": "sensitivity", "family": "lm", "map": self.summary(),
                "rows": self.rows, "environment": environment}


def _level(row: dict) -> str:
    return "-" if row["level"] is None else f"{row['level']:g}"


def build_lm_map(sweep, config, on_row: Callable[[int, dict], object] | None = None,
                 on_progress: Callable[[str], None] | None = None,
                 should_stop=None) -> LMMap:
    """Every group at every level of ``config`` (a ``SensitivityConfig`` whose technique is a
    language model's) on ``sweep`` (an ``LMSweep``), most sensitive first."""
    from benchmarks.measure.lm_quality import evaluate_pair
    from benchmarks.spec.cancel import check_stop
    from optimizers import registry
    from optimizers.lm import decoder_linears
    config.check_family("lm")
    say = on_progress or (lambda _line: None)
    started = time.perf_counter()
    windows = screening_windows(sweep.windows.evaluation(), config.subset, config.subset_seed)
    ids, scored = sweep.windows.ids[windows], sweep.windows.scored[windows]
    model, calibration = sweep.lm.model, sweep.calibration()
    groups = lm_groups(decoder_linears(model), config.by)
    levels = config.cell_levels
    out = LMMap(config.technique, config.by, levels, len(windows), int(scored.sum()))
    rows = []
    for group, names in groups.items():
        for level in levels:
            check_stop(should_stop)
            name, settings = technique_settings(config.technique, level, config.group_size)
            row = {"group": group, "layers": len(names), "names": names,
                   "level": level if name == "prune" else None,
                   "technique": config.technique, "error": None}
            say(f"{group}: {CELL_WORDS[config.technique]}"
                + (f" {level:g}" if name == "prune" else ""))
            try:
                changed, built = registry.get(name).lm_apply_fn()(
                    model, settings, calibration, only=set(names))
                paired = evaluate_pair(model, changed, ids, scored)
            except Exception as exc:  # this cell's failure (a width int4 cannot group)
                row["error"] = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            else:
                q = paired.summary()
                row.update(config=built, delta_nll=q["delta_nll"],
                           delta_nll_interval=q["delta_nll_interval"],
                           within_noise=q["nll_within_noise"],
                           delta_accuracy_pts=100 * q["delta_accuracy"],
                           delta_accuracy_interval_pts=[100 * x for x in
                                                        q["delta_accuracy_interval"]],
                           agreement=q["agreement"], kl_mean=q["kl_mean"],
                           kl_p99=q["kl_p99"], outcomes=paired.to_dict())
            rows.append(row)
            if on_row is not None:
                on_row(len(rows) - 1, {"name": f"{group} @ {_level(row)}", **row})
    # Most sensitive first; failed cells last, in model order.
    out.rows = sorted(rows, key=lambda r: (r["error"] is not None,
                                           -(r.get("delta_nll") or 0.0)))
    out.seconds = time.perf_counter() - started
    return out
