"""What a sensitivity map is asked for: the technique, its levels, how cells are screened and
confirmed, and the budget a schedule is chosen within. Torch-free and self-validating; its
fields' ``setting(...)`` metadata makes the ``sensitivity`` command's flags (and the page's
form), as ``DistributedConfig``'s does for its command.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields

from optimizers.schedules import SCHEDULE_TECHNIQUES
from optimizers.settings import check_settings, setting, setting_fields

IMAGE_TECHNIQUES = tuple(SCHEDULE_TECHNIQUES)  # prune.channel, prune.l1, int8.static/dynamic
# A language model's map (``lm_map``): a group of its decoder's linear layers changed alone.
LM_TECHNIQUES = ("int4", "int8.weight-only", "int8.dynamic", "prune.magnitude", "prune.wanda")
TECHNIQUES = tuple(dict.fromkeys(IMAGE_TECHNIQUES + LM_TECHNIQUES))
LM_GROUPINGS = ("layer", "projection")
OBJECTIVES = ("p50", "p90", "mean")      # which latency figure a schedule saves
SOLVERS = ("lagrangian", "greedy")
DEFAULT_LEVELS = (0.25, 0.5, 0.75)
# A drop budget reads as points of accuracy: "1pt", "0.5pt", "1".
DROP_PATTERN = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(?:pts?|points?)?\s*$")


def parse_drop(text) -> float:
    """Points of accuracy from "1pt" (or "1", "0.5 points"); ValueError names the form."""
    match = DROP_PATTERN.match(text) if isinstance(text, str) else None
    value = float(match.group(1)) if match else math.nan
    if not match or not 0 < value <= 100:
        raise ValueError(f"sensitivity.max_drop must be points of accuracy above 0 and at "
                         f"most 100, e.g. 1pt or 0.5pt; got {text!r}")
    return value


def is_pruning(technique: str) -> bool:
    return technique.startswith("prune.")


@dataclass(frozen=True)
class SensitivityConfig:
    technique: str = setting(
        "prune.channel", "what a group is and what a level does to it: prune.channel (a "
        "Torch-Pruning dependency group loses that fraction of its channels), prune.l1 (a "
        "layer's weight that fraction of its weights), int8.static / int8.dynamic (a fused "
        "op or layer quantized, the rest kept float); a language model's: int4, "
        "int8.weight-only, int8.dynamic, prune.magnitude, prune.wanda (its --by group "
        "changed alone)", choices=TECHNIQUES, flag="--technique")
    by: str = setting("layer", "a language model's group: a decoder layer, or a projection "
                      "kind across layers (q_proj, ..., down_proj)", choices=LM_GROUPINGS,
                      flag="--by", form=False)
    group_size: int = setting(128, "int4's group size (a language model's map): 32, 64, 128 "
                              "or 256", low=32, high=256, integer=True, flag="--group-size",
                              form=False)
    levels: tuple[float, ...] = setting(
        DEFAULT_LEVELS, "the fractions each group is pruned at, one cell each (INT8: a group "
        "is quantized or not, one cell)", low=0.0, high=1.0, low_open=True, many=True,
        suggested=DEFAULT_LEVELS, flag="--levels")
    subset: float = setting(
        0.5, "fraction of the evaluation split every cell is screened on (stratified by "
             "class, drawn by --subset-seed); the confirmed cells use all of it",
        low=0.0, high=1.0, low_open=True, flag="--subset", step=0.05, advanced=True)
    subset_seed: int = setting(0, "seed of the screening subset's draw", low=0,
                               high=2**32 - 1, integer=True, flag="--subset-seed",
                               advanced=True, form=False)
    confirm: int = setting(
        2, "the k most and k least sensitive cells measured again on the whole split",
        low=0, high=1000, integer=True, flag="--confirm", step=1, advanced=True)
    finetune_epochs: int = setting(
        0, "epochs of fine-tuning per pruned cell (0: the map measures sensitivity, not "
           "recovery)", low=0, high=1000, integer=True, flag="--finetune-epochs", step=1,
        advanced=True)
    max_drop: str | None = setting(
        None, "write a schedule: the most latency saved with the sum of the cells' predicted "
              "accuracy drops within this many points", text=True, nullable=True,
        none_means="no schedule", metavar="Npt", flag="--max-drop")
    objective: str = setting("p50", "the latency figure the schedule saves",
                             choices=OBJECTIVES, flag="--objective")
    solver: str = setting(
        "lagrangian", "the multiple-choice knapsack's solver: a Lagrangian sweep of the "
                      "price of a point of accuracy, or greedy by saving per point",
        choices=SOLVERS, flag="--solver", advanced=True)
    verify_rounds: int = setting(
        7, "the schedule's model and the baseline timed in this many interleaved rounds: "
           "the measured saving beside the predicted one (0: not timed)", low=0, high=100,
        integer=True, flag="--verify-rounds", step=1, advanced=True)
    confidence: float = setting(0.95, "confidence of the cells' paired intervals", low=0.5,
                                high=0.999, flag="--confidence", advanced=True, form=False)

    def __post_init__(self):
        object.__setattr__(self, "levels", tuple(self.levels) if isinstance(
            self.levels, (list, tuple)) else self.levels)
        if isinstance(self.levels, tuple) and not self.levels:
            raise ValueError("sensitivity.levels needs at least one level in (0, 1), e.g. "
                             "0.25,0.5,0.75")
        if isinstance(self.levels, tuple):
            outside = [v for v in self.levels if isinstance(v, (int, float))
                       and not isinstance(v, bool) and not 0 < v < 1]
            if outside:
                raise ValueError(f"sensitivity.levels must each be in (0, 1) (the fraction "
                                 f"removed); got {', '.join(map(str, outside))}")
        check_settings(self, "sensitivity")
        from optimizers.settings import INT4_GROUP_SIZES
        if self.group_size not in INT4_GROUP_SIZES:
            raise ValueError(f"sensitivity.group_size must be one of "
                             f"{', '.join(map(str, INT4_GROUP_SIZES))}; got {self.group_size}")
        if self.max_drop is not None:
            parse_drop(self.max_drop)

    def check_family(self, family: str) -> None:
        """A technique of the model's family (``image`` or ``lm``), or one line naming the
        family's techniques."""
        own = LM_TECHNIQUES if family == "lm" else IMAGE_TECHNIQUES
        if self.technique not in own:
            what = "a language model" if family == "lm" else "an image model"
            raise ValueError(f"sensitivity.technique {self.technique} does not map {what}; it "
                             f"takes {', '.join(own)}")
        if family == "lm" and self.max_drop is not None:
            raise ValueError("a language model's map writes no schedule yet: drop --max-drop")

    @property
    def max_drop_pts(self) -> float | None:
        return None if self.max_drop is None else parse_drop(self.max_drop)

    @property
    def cell_levels(self) -> tuple[float, ...]:
        """The levels the map measures: the asked ones for pruning, 1 (quantized) for INT8."""
        return tuple(sorted(self.levels)) if is_pruning(self.technique) else (1.0,)

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["levels"] = list(self.levels)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "SensitivityConfig":
        known = {name for name, _, _ in setting_fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"sensitivity has no setting {unknown[0]!r}; it has "
                             f"{', '.join(sorted(known))}")
        values = dict(data)
        if "levels" in values and isinstance(values["levels"], list):
            values["levels"] = tuple(values["levels"])
        return cls(**values)


def baseline_spec(sweep: dict, **changes):
    """A sweep of only the baseline from a stored sweep's spec (or a job's payload): the same
    model, data, budgets and seed, so its weights come from the cache; ``changes`` (None
    values ignored) override fields such as the threads."""
    from dataclasses import replace

    from benchmarks.spec.sweep import SweepSpec
    from benchmarks.spec.variant import BASELINE
    spec = SweepSpec.from_dict({**sweep, "variants": [BASELINE.to_dict()]})
    return replace(spec, **{k: v for k, v in changes.items() if v is not None})
