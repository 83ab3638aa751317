"""The Experiment page's technique controls, generated from the technique registry's metadata:
a toggle per technique, a widget per setting with the setting's own bounds, choices and step
(``settings_form``, which draws the Distributed page's form too), and for sweepable settings
a sweep mode (a range slider with a number of points, or several choices). A technique
registered tomorrow gets its controls here with no edit.

Widget keys: ``exp_{technique}`` (on/off), ``exp_{technique}_sweep`` (sweep mode),
``exp_{technique}_{field}`` (one value), ``exp_{technique}_{field}_range`` and ``..._count``
(a swept number: from, to, points), ``exp_{technique}_{field}_multi`` (swept choices).
"""

from __future__ import annotations

import streamlit as st

from dashboard.settings_form import several, single
from optimizers import registry


def technique_controls(technique: registry.Technique, models: list[str], *,
                       default_on: bool = True) -> tuple[bool, dict]:
    """(on, {(technique, field): value or tuple of values}) for one technique."""
    name = technique.name
    on = st.toggle(technique.description[:1].upper() + technique.description[1:],
                   value=default_on, key=f"exp_{name}")
    if not on:
        return False, {}
    # Fields for the CLI or its operator (a schedule file's JSON) draw no widget.
    fields = [(f, m, d) for f, m, d in technique.fields() if m.form and not m.hidden]
    sweepable = any(meta.sweep and not meta.advanced for _, meta, _ in fields)
    sweep = sweepable and st.checkbox(f"Sweep {name} settings", key=f"exp_{name}_sweep",
                                      help="Each swept setting takes several values: one "
                                           "variant per point (cross product within the "
                                           "technique).")
    choices = {}
    primary = [(f, m, d) for f, m, d in fields if not m.advanced]
    advanced = [(f, m, d) for f, m, d in fields if m.advanced]
    columns = st.columns(len(primary)) if primary else []
    for column, (field, meta, default) in zip(columns, primary):
        with column:
            make = several if sweep and meta.sweep else single
            choices[(name, field)] = make(field, meta, default, f"exp_{name}_{field}", models)
    if advanced:
        # Budgets and such: one value each; a sweep of them is for the CLI.
        with st.expander(f"More {name} settings"):
            for field, meta, default in advanced:
                choices[(name, field)] = single(field, meta, default, f"exp_{name}_{field}",
                                                models)
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
