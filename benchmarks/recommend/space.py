"""The search space: every sweepable setting of the enabled techniques, with ranges from the
registry (``Setting.search``, else its bounds), narrowed by the ordinary axis flags.

Nothing here names a technique: the registry says which settings sweep, their bounds, steps
and choices. Without a technique flag every registered technique is enabled, and a trial
picks which of them it chains (one categorical ``chain``, in chain order). A flag given one
value fixes that setting; a list or a range (``--prune 0.2:0.8:4``) makes those values the
setting's only choices; a setting left alone is searched over its range. A space with a single
point has nothing to search and is refused. Torch-free: ``VariantSpec`` is plain data.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field

from benchmarks.spec.variant import VariantSpec
from optimizers import registry

CHAIN = "chain"
RUNTIME = "runtime"   # the categorical a trial picks its runtime by, where more than one


@dataclass(frozen=True)
class Knob:
    """One searched setting of one technique."""
    technique: str
    field: str
    kind: str                     # "choice", "int" or "float"
    choices: tuple | None = None
    low: float | None = None
    high: float | None = None
    step: float | None = None

    @property
    def name(self) -> str:
        return f"{self.technique}.{self.field}"

    def suggest(self, trial):
        if self.kind == "choice":
            return trial.suggest_categorical(self.name, list(self.choices))
        if self.kind == "int":
            return trial.suggest_int(self.name, int(self.low), int(self.high),
                                     step=int(self.step or 1))
        value = trial.suggest_float(self.name, self.low, self.high, step=self.step)
        # A stepped float comes back as 0.6000000000000001: named and keyed as 0.6.
        return round(value, 10) if self.step is not None else value

    def holds(self, value) -> bool:
        """Whether ``value`` is a point of this knob (an enqueued default must be)."""
        if self.kind == "choice":
            return value in self.choices
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not self.low <= value <= self.high:
            return False
        return self.step is None or abs((value - self.low) / self.step
                                        - round((value - self.low) / self.step)) < 1e-9

    def size(self) -> int | None:
        if self.kind == "choice":
            return len(self.choices)
        if self.step is None:
            return None
        return int(round((self.high - self.low) / self.step)) + 1

    def to_dict(self) -> dict:
        out = {"setting": self.name, "kind": self.kind}
        if self.kind == "choice":
            out["choices"] = list(self.choices)
        else:
            out.update(low=self.low, high=self.high, step=self.step)
        return out


def _knob(technique: registry.Technique, name: str, meta, given) -> Knob | None:
    """The knob of one setting, or None when it is fixed (one value given, or a free name)."""
    if given is not None:
        values = tuple(given) if isinstance(given, (list, tuple)) else (given,)
        return Knob(technique.name, name, "choice", values) if len(values) > 1 else None
    if not meta.sweep:
        return None
    if meta.kind == "choice":
        return Knob(technique.name, name, "choice", tuple(meta.choices))
    if meta.kind not in ("int", "float"):
        return None  # a free name (a student): searched only over names the flags give
    low, high = meta.search or (meta.low, meta.high)
    step = meta.step if meta.step is not None else (1 if meta.integer else None)
    if meta.low_open and meta.search is None and low == meta.low:
        low = low + (step or 1e-3)
    if low is None or high is None:
        return None
    return Knob(technique.name, name, "int" if meta.integer else "float", low=low, high=high,
                step=step)


@dataclass
class SearchSpace:
    techniques: tuple[str, ...]                    # enabled, in chain order
    knobs: tuple[Knob, ...]
    fixed: dict = field(default_factory=dict)      # (technique, field) -> the one value given
    implicit: bool = False                         # every technique, none switched on by name
    left_out: dict = field(default_factory=dict)   # chain -> why it cannot apply here
    # Where a trial's variant runs (``benchmarks.spec.runtimes``): a trial is a recipe under a
    # runtime, scored and timed from that runtime's own outputs (issue 34). Eager alone: the
    # search is over recipes, as before.
    runtimes: tuple[str, ...] = ("eager",)
    # What it was made from ({"choices", "enabled", "runtimes"}, as a job's payload holds
    # them): a stored recommendation's next step asks again with them (``job.asked_again``).
    asked: dict | None = field(default=None, compare=False)

    def fitted(self, refusal) -> "SearchSpace":
        """The space without the chains that cannot apply to this model, asked of each
        technique's own preflight (``refusal(name, settings, chain)`` raises ValueError with
        its reason): distillation of a model with no student to distil into failed every
        trial that chained it without pruning first. A chain left out is said, with its
        reason, in ``describe``; a technique switched on by name that no chain can hold is
        refused with its reason."""
        left_out = dict(self.left_out)
        reasons: dict[str, str] = {}
        for chain in self.chains:
            names = tuple(chain.split("+"))
            for name in names:
                chosen = {f: v for (t, f), v in self.fixed.items() if t == name}
                try:
                    refusal(name, registry.get(name).make(chosen), names)
                except ValueError as exc:
                    left_out[chain] = reasons[name] = str(exc)
                    break
        if len(left_out) == len(self.left_out):
            return self
        fitted = dataclasses.replace(self, left_out=left_out)
        held = {name for chain in fitted.chains for name in chain.split("+")}
        for name in self.techniques:
            if name not in held and (not self.implicit or not held):
                raise ValueError(reasons.get(name) or f"no chain of {name} applies here")
        return fitted

    @property
    def chains(self) -> tuple[str, ...]:
        """Every non-empty subset of the enabled techniques, in chain order, as 'a+b' (less
        those left out)."""
        out = []
        for k in range(1, len(self.techniques) + 1):
            out += ["+".join(c) for c in itertools.combinations(self.techniques, k)]
        return tuple(c for c in out if c not in self.left_out)

    def knobs_of(self, technique: str) -> list[Knob]:
        return [k for k in self.knobs if k.technique == technique]

    def size(self) -> int | None:
        """How many distinct trials it holds, recipes x runtimes (None: a continuous
        range)."""
        total = 0
        for chain in self.chains:
            count = 1
            for name in chain.split("+"):
                for knob in self.knobs_of(name):
                    size = knob.size()
                    if size is None:
                        return None
                    count *= size
            total += count
        return total * len(self.runtimes)

    def suggest(self, trial) -> VariantSpec:
        """The trial's variant: Optuna picks the chain, then the knobs of its techniques (a
        define-by-run space: a setting is sampled only when its technique is in the chain)."""
        chain = self.chains[0] if len(self.chains) == 1 else trial.suggest_categorical(
            CHAIN, list(self.chains))
        values = {}
        for name in chain.split("+"):
            values[name] = {k.field: k.suggest(trial) for k in self.knobs_of(name)}
        return self.variant(values)

    def suggest_runtime(self, trial) -> str:
        """The trial's runtime: Optuna picks it where the space has more than one."""
        if len(self.runtimes) == 1:
            return self.runtimes[0]
        return trial.suggest_categorical(RUNTIME, list(self.runtimes))

    def variant(self, values: dict) -> VariantSpec:
        """The variant of {technique: {field: value}} (the fixed settings and the registry's
        defaults fill the rest), named by every searched setting so names stay distinct."""
        settings, labels, axes = {}, [], {}
        for name in [t for t in self.techniques if t in values]:
            technique = registry.get(name)
            chosen = {f: v for (t, f), v in self.fixed.items() if t == name}
            chosen.update(values[name])
            settings[name] = technique.make(chosen)
            searched = {k.field for k in self.knobs_of(name)}
            labels.append(technique.label(settings[name], searched))
            axes.update({f"{name}.{f}": getattr(settings[name], f) for f in sorted(searched)})
        return VariantSpec("+".join(labels), tuple(settings), settings, axes=axes)

    def starting_points(self) -> list[dict]:
        """Optuna parameters of each enabled technique alone at its registry defaults (where
        they lie in the space): the points a default sweep measured, so an earlier sweep's
        weights are found in the cache, and the search starts from what people try first."""
        points = []
        for name in self.techniques:
            if name not in self.chains:
                continue  # left out alone (a student to distil into, say)
            params = {} if len(self.chains) == 1 else {CHAIN: name}
            if len(self.runtimes) > 1:  # the first runtime given (eager: what a sweep ran)
                params[RUNTIME] = self.runtimes[0]
            defaults = {f: d for f, _, d in registry.get(name).fields()}
            ok = True
            for knob in self.knobs_of(name):
                value = defaults.get(knob.field)
                if value is None or not knob.holds(value):
                    ok = False
                    break
                params[knob.name] = value
            if ok:
                points.append(params)
        return points

    def describe(self) -> str:
        parts = [k.name + (f" in {{{', '.join(map(str, k.choices))}}}" if k.kind == "choice"
                           else f" in [{k.low:g}, {k.high:g}]") for k in self.knobs]
        chains = f"{len(self.chains)} chains of {', '.join(self.techniques)}"
        text = f"{chains}; " + ("; ".join(parts) if parts else "no setting varies")
        if len(self.runtimes) > 1:
            text += f"; under {', '.join(self.runtimes)}"
        by_reason: dict[str, list[str]] = {}
        for chain, why in self.left_out.items():
            by_reason.setdefault(why, []).append(chain)
        for why, chains in by_reason.items():
            text += f"; left out: {', '.join(chains)} ({why})"
        return text

    def to_dict(self) -> dict:
        return {"techniques": list(self.techniques), "chains": list(self.chains),
                "knobs": [k.to_dict() for k in self.knobs], "size": self.size(),
                "fixed": {f"{t}.{f}": v for (t, f), v in self.fixed.items()},
                "left_out": dict(self.left_out), "runtimes": list(self.runtimes),
                **({"asked": self.asked} if self.asked is not None else {})}


def search_space(choices: dict, enabled, runtimes=("eager",)) -> SearchSpace:
    """The space from the axis flags as ``run`` parses them ({(technique, field): value or
    values}, the techniques switched on): every technique when none is switched on; each
    recipe under each of ``runtimes`` (names of the runtime registry, in the order given)."""
    from benchmarks.spec.runtimes import get as runtime
    runtimes = tuple(runtimes or ("eager",))
    for name in runtimes:
        runtime(name)
    if len(set(runtimes)) != len(runtimes):
        raise ValueError(f"--runtime lists a runtime twice: {', '.join(runtimes)}")
    choices_enabled = set(enabled)
    # An image model's techniques (recommend does not take a language model yet).
    image = [t.name for t in registry.techniques("image")]
    enabled = choices_enabled or set(image)
    for (name, _), value in choices.items():
        if name not in enabled:
            technique = registry.get(name)
            raise ValueError(f"{technique.flag(_)} narrows {name}, which is off here; add "
                             f"{technique.switch_flag}")
    techniques = tuple(name for name in image if name in enabled)
    knobs, fixed = [], {}
    for name in techniques:
        technique = registry.get(name)
        for field_name, meta, _ in technique.fields():
            given = choices.get((name, field_name))
            if given is not None:
                values = tuple(given) if isinstance(given, (list, tuple)) else (given,)
                for value in values:
                    meta.check(name, field_name, value)
                if len(values) == 1:
                    fixed[(name, field_name)] = values[0]
            knob = _knob(technique, field_name, meta, given)
            if knob is not None:
                knobs.append(knob)
    asked = {"choices": {f"{t}.{f}": list(v) if isinstance(v, (list, tuple)) else v
                         for (t, f), v in choices.items()},
             "enabled": sorted(choices_enabled), "runtimes": list(runtimes)}
    space = SearchSpace(techniques, tuple(knobs), fixed, implicit=not choices_enabled,
                        runtimes=runtimes, asked=asked)
    if space.size() == 1:
        flags = ", ".join(registry.get(t).switch_flag for t in techniques)
        raise ValueError(f"the search space has no sweepable knob: {flags} with every setting "
                         f"fixed is one variant; leave a setting free, give it a list or a "
                         f"range (--prune 0.2:0.8:4), or enable another technique")
    return space
