"""Planning a sweep's variants from toggles and axes (``--prune 0.2,0.4 --prune-method
l1,channel``): the cross products, the controls, the variant cap, all checked before anything
runs."""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from benchmarks.spec.variant import BASELINE, VariantSpec
from optimizers import registry

# Above this many variants a sweep is refused before anything runs (--max-variants).
DEFAULT_MAX_VARIANTS = 64


def expand_range(start: float, stop: float, count: int, integer: bool = False) -> tuple:
    """``count`` values evenly spaced from ``start`` to ``stop``, both included (integers
    rounded for integer settings): what ``--prune 0.1:0.9:5`` means."""
    if count < 1:
        raise ValueError(f"a range needs at least 1 point, got {count}")
    if count == 1:
        values = [start]
    else:
        step = (stop - start) / (count - 1)
        values = [start + i * step for i in range(count)]
    if integer:
        return tuple(int(round(v)) for v in values)
    return tuple(round(v, 10) for v in values)


Choice = dict  # {(technique, field): tuple of values}; one value, or several for an axis


def _values(value) -> tuple:
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return (value,)


def _check_axis(technique: registry.Technique, field: str, values: tuple) -> None:
    meta = technique.field(field)
    flag = technique.flag(field)
    if not values:
        raise ValueError(f"{flag} needs at least one value")
    if len(values) > 1 and not meta.sweep:
        raise ValueError(f"{flag} takes one value (it cannot be swept); got "
                         f"{', '.join(map(str, values))}")
    for v in values:
        meta.check(technique.name, field, v)
    if len(set(values)) != len(values):
        twice = next(v for i, v in enumerate(values) if v in values[:i])
        raise ValueError(f"{flag} lists {twice!r} twice; give each value once")


def plan_variants(choices: Mapping[tuple[str, str], object], enabled: set[str] | list[str], *,
                  combine: bool = False, max_variants: int = DEFAULT_MAX_VARIANTS
                  ) -> tuple[VariantSpec, ...]:
    """The variants of a sweep: the baseline; for each enabled technique, one variant per
    point of the cross product of its values (``--prune 0.2,0.4 --prune-method l1,channel``:
    four); each technique's control once per distinct setting it depends on; with ``combine``,
    one chained variant per point of the cross product of every enabled technique's values.
    Values are checked against their settings' bounds before anything runs."""
    enabled = [t.name for t in registry.techniques() if t.name in set(enabled)]
    for name in set(enabled) - set(registry.names()):
        registry.get(name)
    for (name, field), value in choices.items():
        technique = registry.get(name)
        if name not in enabled and len(_values(value)) > 1:
            raise ValueError(f"{technique.flag(field)} sweeps {technique.name}, which is off; "
                             f"add {technique.switch_flag}")
    if combine and len(enabled) < 2:
        flags = ", ".join(t.switch_flag for t in registry.techniques())
        raise ValueError(f"combine needs at least two enabled techniques ({flags})")

    per_technique: dict[str, list[tuple[object, dict]]] = {}
    varying: dict[str, set[str]] = {}
    for name in enabled:
        technique = registry.get(name)
        axes: list[tuple[str, tuple]] = []
        # Label fields vary slowest, so a sweep reads method by method, ratio by ratio.
        ordered = sorted(technique.fields(), key=lambda f: (
            technique.label_fields.index(f[0]) if f[0] in technique.label_fields
            else len(technique.label_fields)))
        for field, _, default in ordered:
            values = _values(choices.get((name, field), default))
            _check_axis(technique, field, values)
            axes.append((field, values))
        varying[name] = {f for f, vs in axes if len(vs) > 1}
        points = []
        for combo in itertools.product(*(vs for _, vs in axes)):
            values = dict(zip((f for f, _ in axes), combo))
            settings = technique.make(values)
            points.append((settings, {f"{name}.{f}": values[f] for f in varying[name]}))
        per_technique[name] = points

    count = 1 + sum(len(p) for p in per_technique.values())
    count += sum(len(_controls(registry.get(n), per_technique[n])) for n in enabled)
    if combine:
        count += _product_size(per_technique.values())
    if count > max_variants:
        swept = ", ".join(f"{registry.get(n).flag(f)} ({len(_values(choices[(n, f)]))} values)"
                          for n in enabled for f in sorted(varying[n]) if (n, f) in choices)
        raise ValueError(f"this sweep has {count} variants, above the cap of {max_variants}: "
                         f"give fewer values{' to ' + swept if swept else ''}"
                         f"{', drop --combine' if combine else ''}, or raise --max-variants")

    variants = [BASELINE]
    for name in enabled:
        technique = registry.get(name)
        for settings, axes in per_technique[name]:
            variants.append(VariantSpec(technique.label(settings, varying[name]), (name,),
                                        {name: settings}, axes=axes))
        for settings in _controls(technique, per_technique[name]):
            control = technique.control
            suffix = "-".join(technique.field(f).format(getattr(settings, f))
                              for f in control.uses if f in varying[name]
                              and getattr(settings, f) is not None)
            variants.append(VariantSpec(control.name + (f"-{suffix}" if suffix else ""),
                                        (control.name,), {name: settings}))
    if combine:
        for combo in itertools.product(*(per_technique[n] for n in enabled)):
            settings = {n: s for n, (s, _) in zip(enabled, combo)}
            axes = {k: v for _, a in combo for k, v in a.items()}
            label = "+".join(registry.get(n).label(s, varying[n]) for n, s in settings.items())
            variants.append(VariantSpec(label, tuple(enabled), settings, axes=axes))
    return tuple(variants)


def _controls(technique: registry.Technique, points: list) -> list:
    """One control per distinct value of the settings it depends on."""
    if technique.control is None:
        return []
    seen, out = set(), []
    for settings, _ in points:
        key = tuple(getattr(settings, f) for f in technique.control.uses)
        if key not in seen:
            seen.add(key)
            out.append(settings)
    return out


def _product_size(groups) -> int:
    size = 1
    for g in groups:
        size *= len(g)
    return size


def toggle_choices(toggles: Mapping[str, object]) -> tuple[dict, set[str]]:
    """Toggles named like the CLI's flags (``prune=0.5``, ``prune_method="l1"``,
    ``distill=True``, ``amp=True`` or ``"bf16"``, ``int8="static"``) as (choices, enabled).
    A technique's switch turns it on: its value (a ratio, a mode) or True; None and False
    leave it off."""
    by_flag = {}
    for t in registry.techniques():
        for field, _, _ in t.fields():
            by_flag[t.flag(field).lstrip("-").replace("-", "_")] = (t, field)
        if t.switch is None:
            by_flag[t.name] = (t, None)
    choices, enabled = {}, set()
    for key, value in toggles.items():
        if key not in by_flag:
            raise ValueError(f"unknown setting {key!r}; known: {', '.join(sorted(by_flag))}")
        technique, field = by_flag[key]
        is_switch = field is None or field == technique.switch
        if is_switch:
            if field is None:  # a bare switch such as distill
                if not isinstance(value, bool):
                    raise ValueError(f"{key} must be true or false, got {value!r}")
                if value:
                    enabled.add(technique.name)
                continue
            if value is None or value is False:
                continue
            enabled.add(technique.name)
            if value is True:
                if not technique.field(field).nullable:
                    raise ValueError(f"{key} must be {technique.field(field).accepted()}; "
                                     f"got True")
                continue  # on, with the field's default
        elif value is None and not technique.field(field).nullable:
            continue  # not given
        choices[(technique.name, field)] = value
    return choices, enabled
