"""The Experiment page's technique controls, generated from the technique registry's metadata:
a toggle per technique, a widget per setting with the setting's own bounds, choices and step,
and for sweepable settings a sweep mode (a range slider with a number of points, or several
choices). A technique registered tomorrow gets its controls here with no edit.

Widget keys: ``exp_{technique}`` (on/off), ``exp_{technique}_sweep`` (sweep mode),
``exp_{technique}_{field}`` (one value), ``exp_{technique}_{field}_range`` and ``..._count``
(a swept number: from, to, points), ``exp_{technique}_{field}_multi`` (swept choices).
"""

from __future__ import annotations

import streamlit as st

from optimizers import registry

AUTO = "(default)"
# A slider beyond this many steps is too fine to drag (temperature 0.5-100): a number box.
MAX_SLIDER_STEPS = 60
MAX_POINTS = 12


def _label(field: str) -> str:
    return field.replace("_", " ").capitalize()


def _help(meta) -> str:
    return f"{meta.help}. Accepted: {meta.accepted()}."


def _number_range(meta):
    step = meta.step or (1 if meta.integer else 0.05)
    low = meta.low if meta.low is not None else 0
    if meta.low_open:
        low = low + step
    high = meta.high if meta.high is not None else low + 100 * step
    cast = int if meta.integer else float
    return cast(low), cast(high), cast(step)


def _single(technique, field, meta, default, key, models):
    """One value for a setting."""
    label, help_text = _label(field), _help(meta)
    if meta.kind == "choice":
        options = ([AUTO] if meta.nullable else []) + list(meta.choices)
        shown = {AUTO: f"default ({meta.none_means})"} if meta.nullable else {}
        value = st.selectbox(label, options, key=key, help=help_text,
                             index=options.index(default if default is not None else AUTO),
                             format_func=lambda o: shown.get(o, o))
        return None if value == AUTO else value
    if meta.kind == "text":
        options = [AUTO] + list(models)
        value = st.selectbox(label, options, key=key, help=help_text,
                             format_func=lambda o: f"default ({meta.none_means})"
                             if o == AUTO else o)
        return None if value == AUTO else value
    low, high, step = _number_range(meta)
    if meta.nullable:
        return st.number_input(f"{label} (empty: {meta.none_means})", low, high, None, step,
                               key=key, help=help_text)
    if (high - low) / step <= MAX_SLIDER_STEPS:
        return st.slider(label, low, high, type(low)(default), step, key=key, help=help_text)
    return st.number_input(label, low, high, type(low)(default), step, key=key,
                           help=help_text)


def _sweep(technique, field, meta, default, key, models):
    """Several values for a setting: a range and a number of points, or several choices."""
    label, help_text = _label(field), _help(meta)
    if meta.kind in ("choice", "text"):
        options = list(meta.choices) if meta.kind == "choice" else list(models)
        if meta.nullable:
            options = [AUTO] + options
        picked = st.multiselect(f"{label} (sweep)", options, key=f"{key}_multi",
                                help=help_text,
                                default=[default if default is not None else AUTO])
        return tuple(None if p == AUTO else p for p in picked)
    low, high, step = _number_range(meta)
    start = type(low)(default if default is not None else low)
    a, b = st.columns([3, 1])
    lo, hi = a.slider(f"{label} (sweep from, to)", low, high, (low, max(start, low + step)),
                      step, key=f"{key}_range", help=help_text)
    count = b.number_input("points", 1, MAX_POINTS, min(5, MAX_POINTS), 1, key=f"{key}_count")
    from benchmarks.spec.plan import expand_range
    # Whole numbers over a short range repeat when rounded (0, 0, 1, 2, 2): once each.
    return tuple(dict.fromkeys(expand_range(lo, hi, int(count), meta.integer)))


def technique_controls(technique: registry.Technique, models: list[str], *,
                       default_on: bool = True) -> tuple[bool, dict]:
    """(on, {(technique, field): value or tuple of values}) for one technique."""
    name = technique.name
    on = st.toggle(technique.description[:1].upper() + technique.description[1:],
                   value=default_on, key=f"exp_{name}")
    if not on:
        return False, {}
    sweepable = any(meta.sweep and not meta.advanced for _, meta, _ in technique.fields())
    sweep = sweepable and st.checkbox(f"Sweep {name} settings", key=f"exp_{name}_sweep",
                                      help="Each swept setting takes several values: one "
                                           "variant per point (cross product within the "
                                           "technique).")
    choices = {}
    primary = [(f, m, d) for f, m, d in technique.fields() if not m.advanced]
    advanced = [(f, m, d) for f, m, d in technique.fields() if m.advanced]
    columns = st.columns(len(primary)) if primary else []
    for column, (field, meta, default) in zip(columns, primary):
        with column:
            make = _sweep if sweep and meta.sweep else _single
            choices[(name, field)] = make(technique, field, meta, default,
                                          f"exp_{name}_{field}", models)
    if advanced:
        # Budgets and such: one value each; a sweep of them is for the CLI.
        with st.expander(f"More {name} settings"):
            for field, meta, default in advanced:
                choices[(name, field)] = _single(technique, field, meta, default,
                                                 f"exp_{name}_{field}", models)
    return True, choices


def all_controls(models: list[str]) -> tuple[set[str], dict]:
    """Every registered technique's controls: (enabled, choices)."""
    enabled, choices = set(), {}
    for technique in registry.techniques():
        on, picked = technique_controls(technique, models)
        if on:
            enabled.add(technique.name)
            choices.update(picked)
    return enabled, choices


def model_fields(enabled: set[str], choices: dict) -> list:
    """The values picked for every model-name setting of the enabled techniques
    (distillation's student): what the page checks against the chosen model."""
    return [value for (name, field), value in choices.items()
            if name in enabled and registry.get(name).field(field).kind == "text"]
