"""The Experiment page's technique controls, generated from the technique registry's metadata:
a toggle per technique, a widget per setting with the setting's own bounds, choices and step
(``settings_form``, which draws the Distributed page's form too), and for sweepable settings
a sweep mode (a range slider with a number of points, or several choices). A technique
registered tomorrow gets its controls here with no edit.

Widget keys: ``exp_{technique}`` (on/off), ``exp_{technique}_sweep`` (sweep mode),
``exp_{technique}_{field}`` (one value), ``exp_{technique}_{field}_range`` and ``..._count``
(a swept number: from, to, points), ``exp_{technique}_{field}_multi`` (swept choices).
In the URL (``links``): ``prune=off``, ``prune.sweep=on``, ``prune.ratio=0.1:0.9:5``.
"""

from __future__ import annotations

import re
from dataclasses import replace

import streamlit as st

from dashboard.settings_form import several, single, unless_set
from optimizers import registry


def url_names() -> list[str]:
    """The URL's name of every technique control (``links``), from the registry: the switch
    ``prune``, the sweep mode ``prune.sweep`` and a setting ``prune.ratio``; an image model's
    and a language model's (one page draws one family's)."""
    names = []
    for family in registry.FAMILIES:
        for technique in registry.techniques(family):
            names.append(technique.name)
            if _sweepable(technique, family):
                names.append(f"{technique.name}.sweep")
            names += [f"{technique.name}.{field}"
                      for field, _, _ in _shown_fields(technique, family)]
    return list(dict.fromkeys(names))


def _shown_fields(technique: registry.Technique, family: str = "image") -> list:
    """The fields a page draws: not those for the CLI or its operator (a schedule's JSON).
    For a language model, its own choices (``lm_choices``) and none of the budgets (a
    language model is not trained: no fine-tuning, no calibration batches)."""
    shown = []
    for f, m, d in technique.fields():
        if not m.form or m.hidden:
            continue
        if family == "lm":
            if m.advanced:
                continue
            if m.lm_choices is not None:
                m = replace(m, choices=m.lm_choices, lm_choices=None)
                d = d if d in m.choices else m.choices[0]
        shown.append((f, m, d))
    return shown


def _sweepable(technique: registry.Technique, family: str = "image") -> bool:
    return any(meta.sweep and not meta.advanced
               for _, meta, _ in _shown_fields(technique, family))


def _switch(name: str, title: str, default: bool, key: str, url, **kw) -> bool:
    """A toggle (``checkbox=False``) or checkbox whose value travels in the URL as ``name``."""
    from dashboard import links
    make = st.checkbox if kw.pop("checkbox", False) else st.toggle
    first = default if url is None else url.initial(name, key, links.parse_bool, default)
    on = make(title, value=unless_set(key, first), key=key, **kw)
    if url is not None:
        url.keep(name, links.show_bool(on), links.show_bool(default))
    return on


def switch_label(text: str) -> str:
    """A technique's toggle label: its description without the parentheses (they go in the
    help), so it holds on one line of the page's column at 1280 pixels."""
    short = re.sub(r"\s*\([^()]*\)", "", text).strip()
    return short[:1].upper() + short[1:]


def follow_default(key: str, default) -> None:
    """A widget's value follows its default where the default changed since the last draw
    (another model: distillation on where it has a student, off where it has none); a person's
    choice stands while the default does."""
    memory = f"{key}:default"
    if memory in st.session_state and st.session_state[memory] != default \
            and key in st.session_state:
        st.session_state[key] = default
    st.session_state[memory] = default


def technique_controls(technique: registry.Technique, models: list[str], *,
                       default_on: bool = True, url=None, family: str = "image",
                       none_means: dict | None = None) -> tuple[bool, dict]:
    """(on, {(technique, field): value or tuple of values}) for one technique. ``url``: the
    page's ``links.UrlForm``, which every control reads its first value from and writes to.
    ``family``: a language model's controls have keys of their own (``exp_lm_...``), so
    switching the model's family never hands a widget a value it does not offer.
    ``default_on``: its switch's default, which the switch follows when it changes;
    ``none_means``: {field: what its default means for this model}."""
    name = technique.name
    prefix = "exp_lm" if family == "lm" else "exp"
    text = (technique.lm_description if family == "lm" else None) or technique.description
    follow_default(f"{prefix}_{name}", default_on)
    on = _switch(name, switch_label(text), default_on, f"{prefix}_{name}", url,
                 help=text[:1].upper() + text[1:])
    if not on:
        return False, {}
    fields = _shown_fields(technique, family)
    sweep = _sweepable(technique, family) and _switch(
        f"{name}.sweep", f"Sweep {name} settings", False, f"{prefix}_{name}_sweep", url,
        checkbox=True, help="Each swept setting takes several values: one variant per point "
                            "(cross product within the technique).")
    choices = {}
    # Numbers and choices side by side; a model's name (distillation's student) on a row of
    # its own, wide enough for torchvision:NAME.
    primary = [(f, m, d) for f, m, d in fields if not m.advanced and m.kind != "text"]
    names = [(f, m, d) for f, m, d in fields if not m.advanced and m.kind == "text"]
    advanced = [(f, m, d) for f, m, d in fields if m.advanced]
    columns = st.columns(len(primary)) if primary else []
    for where, (field, meta, default) in [*zip(columns, primary),
                                          *((st.container(), f) for f in names)]:
        with where:
            make = several if sweep and meta.sweep else single
            extra = {"none_means": none_means[field]} if make is single and field in (
                none_means or {}) else {}
            choices[(name, field)] = make(field, meta, default, f"{prefix}_{name}_{field}",
                                          models, url=url, name=f"{name}.{field}", **extra)
    if advanced:
        # Budgets and such: one value each; a sweep of them is for the CLI.
        with st.expander(f"More {name} settings"):
            for field, meta, default in advanced:
                choices[(name, field)] = single(field, meta, default, f"{prefix}_{name}_{field}",
                                                models, url=url, name=f"{name}.{field}")
    return True, choices


def all_controls(models: list[str], url=None, family: str = "image", *,
                 defaults: dict | None = None, none_means: dict | None = None
                 ) -> tuple[set[str], dict]:
    """Every registered technique's controls for a model of ``family``: (enabled,
    choices). ``defaults``: {technique: on by default} (else on); ``none_means``:
    {technique: {field: what its default means}}."""
    enabled, choices = set(), {}
    for technique in registry.techniques(family):
        on, picked = technique_controls(
            technique, models, url=url, family=family,
            default_on=(defaults or {}).get(technique.name, True),
            none_means=(none_means or {}).get(technique.name))
        if on:
            enabled.add(technique.name)
            choices.update(picked)
    return enabled, choices

