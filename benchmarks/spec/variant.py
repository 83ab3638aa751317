"""One variant: the techniques it applies, in chain order, with their settings.

The techniques' vocabulary (names, settings, their bounds, flags and chain order) comes from
the technique registry (``optimizers.registry``); nothing here names a technique. A bad value
is rejected with a message naming the field, the accepted values and what was given.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from optimizers import registry
from optimizers.settings import check_choice


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def _plain(value):
    """Settings values as JSON keeps them (tuples become lists)."""
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True, init=False)
class VariantSpec:
    """One variant: the techniques it applies, in chain order, with their settings; or one
    technique's control (e.g. ``student-scratch``), built from that technique's settings.

    ``VariantSpec("p", ("prune",), prune=PruneSettings(0.5))`` names settings by technique;
    ``settings={"prune": ...}`` does the same for any registered technique. ``axes`` says where
    the variant sits on each swept setting (``{"prune.ratio": 0.6}``)."""

    name: str
    techniques: tuple[str, ...]
    settings: tuple[tuple[str, object], ...]
    axes: tuple[tuple[str, object], ...]

    def __init__(self, name: str, techniques=(), settings: Mapping | None = None, *,
                 axes: Mapping | None = None, **by_technique):
        merged = dict(settings or {})
        for key, value in by_technique.items():
            registry.get(key)  # an unknown keyword is an unknown technique
            if value is not None:
                merged[key] = value
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "techniques", tuple(techniques))
        object.__setattr__(self, "axes", tuple(sorted((axes or {}).items())))
        order = registry.names()
        object.__setattr__(self, "settings", tuple(sorted(
            merged.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else -1)))
        self._validate()

    def _validate(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"variant.name must be a non-empty string, got {self.name!r}")
        given = dict(self.settings)
        for name, value in given.items():
            expected = registry.get(name).settings
            if not isinstance(value, expected):
                raise ValueError(f"variant {self.name!r}: {name} needs {expected.__name__}, "
                                 f"got {type(value).__name__}")
        control = self.control
        if control is not None:
            if len(self.techniques) != 1:
                raise ValueError(f"variant.techniques: {control.name} is a control and "
                                 f"stands alone")
            if control.of not in given:
                raise ValueError(f"variant {self.name!r} is the {control.name} control but has "
                                 f"no {control.of} settings")
            return
        allowed = registry.names() + tuple(registry.controls())
        for t in self.techniques:
            check_choice("variant", "techniques", t, allowed)
        if len(set(self.techniques)) != len(self.techniques):
            raise ValueError(f"variant.techniques must not repeat, got {list(self.techniques)}")
        for t in self.techniques:
            if t not in given:
                raise ValueError(f"variant {self.name!r} applies {t} but has no {t} settings")
        order = [t for t in registry.names() if t in self.techniques]
        if list(self.techniques) != order:
            raise ValueError(f"variant.techniques must follow the order "
                             f"{' -> '.join(registry.names())}; got {list(self.techniques)}")

    def __getattr__(self, name: str):
        # v.prune, v.distill...: the settings of a registered technique, or None.
        if name.startswith("_") or name not in registry.names():
            raise AttributeError(name)
        return dict(self.settings).get(name)

    @property
    def control(self) -> registry.Control | None:
        """The control this variant is (e.g. distillation's student-scratch), or None."""
        if len(self.techniques) == 1:
            return registry.control(self.techniques[0])
        return None

    @property
    def steps(self) -> list[tuple[str, object]]:
        """(technique, settings) in chain order, as ``optimizers.chain`` applies them."""
        given = dict(self.settings)
        return [(t, given[t]) for t in self.techniques]

    def config(self) -> dict:
        """The settings this variant uses, as plain data: a control lists only the settings
        it depends on (the scratch student does not use a temperature)."""
        control = self.control
        if control is not None:
            return {control.name: control.config(dict(self.settings)[control.of])}
        return {t: {k: _plain(v) for k, v in asdict(s).items()} for t, s in self.steps}

    @property
    def trains(self) -> bool:
        """Whether building it trains weights (the baseline's are trained apart)."""
        if self.control is not None:
            return True
        return any(registry.get(t).trains(s) for t, s in self.steps)

    def axes_dict(self) -> dict:
        return dict(self.axes)

    def stable_hash(self) -> str:
        """Same settings, same hash, across processes and runs."""
        payload = {"techniques": list(self.techniques), **self.config()}
        return hashlib.sha256(_canonical(payload).encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        out = {"name": self.name, "techniques": list(self.techniques),
               "settings": {t: asdict(s) for t, s in self.settings}}
        if self.axes:
            out["axes"] = self.axes_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "VariantSpec":
        techniques = tuple(data.get("techniques") or ())
        raw = data.get("settings") or {}
        settings = {}
        for name, values in raw.items():
            control = registry.control(name)
            technique = registry.get(control.of if control else name)
            settings[technique.name] = technique.make(dict(values))
        return cls(data["name"], techniques, settings, axes=data.get("axes"))


BASELINE = VariantSpec(name="baseline")
