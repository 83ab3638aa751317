"""Widgets generated from ``setting(...)`` metadata (``optimizers.settings.Setting``): one per
setting, with the setting's own bounds, choices, step and help, so a page's ranges are the
config's. The Experiment page's technique controls (``technique_form``) and the Distributed
page's form (``config_form``, from ``DistributedConfig``'s fields) are both drawn with these.

A widget returns the value as the config takes it (a number, a name, a tuple for a setting
of several values) or, for text that does not parse, the text itself: the config's own check
then refuses it in one line, which the page shows with ``st.error``.
"""

from __future__ import annotations

import streamlit as st

from optimizers.settings import setting_fields

AUTO = "(default)"
# A slider beyond this many steps is too fine to drag (temperature 0.5-100): a number box.
MAX_SLIDER_STEPS = 60
MAX_POINTS = 12
COLUMNS = 3  # widgets per row of a config's form


def label(field: str) -> str:
    return field.replace("_", " ").capitalize()


def help_text(meta) -> str:
    return f"{meta.help}. Accepted: {meta.accepted()}."


def number_range(meta):
    step = meta.step or (1 if meta.integer else 0.05)
    low = meta.low if meta.low is not None else 0
    if meta.low_open:
        low = low + step
    high = meta.high if meta.high is not None else low + 100 * step
    cast = int if meta.integer else float
    return cast(low), cast(high), cast(step)


def _values(text: str, integer: bool):
    """``3,32,32`` -> (3, 32, 32); empty -> None; what does not parse -> the text."""
    text = text.strip()
    if not text:
        return None
    try:
        return tuple(int(p) if integer else float(p) for p in text.split(","))
    except ValueError:
        return text


def single(field, meta, default, key, options=()):
    """One value for a setting (a tuple of a fixed length is typed as a,b,c)."""
    name, help_ = label(field), help_text(meta)
    if meta.kind == "bool":
        return st.toggle(name, value=bool(default), key=key, help=help_)
    if meta.length is not None:
        shown = "" if default is None else ",".join(map(str, default))
        empty = f" (empty: {meta.none_means})" if meta.nullable else ""
        return _values(st.text_input(f"{name}{empty}", shown, key=key, help=help_,
                                     placeholder=meta.metavar), meta.integer)
    if meta.kind in ("choice", "text"):
        listed = list(meta.choices) if meta.kind == "choice" else list(options)
        choices = ([AUTO] if meta.nullable else []) + listed
        if default is not None and default not in choices:
            choices.insert(0, default)
        picked = default if default is not None else (AUTO if meta.nullable else choices[0])
        shown = {AUTO: f"default ({meta.none_means})"}
        value = st.selectbox(name, choices, key=key, help=help_, index=choices.index(picked),
                             format_func=lambda o: shown.get(o, o))
        return None if value == AUTO else value
    low, high, step = number_range(meta)
    if meta.nullable:
        return st.number_input(f"{name} (empty: {meta.none_means})", low, high, None, step,
                               key=key, help=help_)
    if (high - low) / step <= MAX_SLIDER_STEPS:
        return st.slider(name, low, high, type(low)(default), step, key=key, help=help_)
    return st.number_input(name, low, high, type(low)(default), step, key=key, help=help_)


def several(field, meta, default, key, options=()):
    """Several values for a setting: picked among its choices (or suggested values), or a
    range and a number of points. A technique's sweep, a config's ``many`` setting."""
    name = label(field) + (" (sweep)" if meta.sweep else "")
    help_ = help_text(meta)
    defaults = list(default) if isinstance(default, tuple) else [default]
    if meta.kind in ("choice", "text") or meta.suggested:
        listed = list(meta.choices if meta.kind == "choice" else meta.suggested
                      if meta.suggested else options)
        if meta.nullable:
            listed = [AUTO] + listed
        picked = st.multiselect(name, listed, key=f"{key}_multi", help=help_,
                                default=[AUTO if d is None else d for d in defaults])
        return tuple(None if p == AUTO else p for p in picked)
    low, high, step = number_range(meta)
    start = type(low)(defaults[0] if defaults[0] is not None else low)
    a, b = st.columns([3, 1])
    lo, hi = a.slider(f"{name} (from, to)", low, high, (low, max(start, low + step)), step,
                      key=f"{key}_range", help=help_)
    count = b.number_input("points", 1, MAX_POINTS, min(5, MAX_POINTS), 1, key=f"{key}_count")
    from benchmarks.spec.plan import expand_range
    # Whole numbers over a short range repeat when rounded (0, 0, 1, 2, 2): once each.
    return tuple(dict.fromkeys(expand_range(lo, hi, int(count), meta.integer)))


def config_form(config_type, prefix: str, options: dict | None = None) -> dict:
    """A widget per field of a ``setting(...)``-declared config that a page may set (not
    ``form=False``, not ``hidden``), in rows of COLUMNS; ``advanced`` ones under "More
    settings". ``options``: a text field's menu (``{"model": [...]}``). Widget keys:
    ``{prefix}_{field}`` (``_multi`` for several values). Returns {field: value}."""
    options = options or {}
    shown = [(f, m, d) for f, m, d in setting_fields(config_type) if m.form and not m.hidden]
    values = {}

    def draw(fields):
        for row in range(0, len(fields), COLUMNS):
            for column, (field, meta, default) in zip(st.columns(COLUMNS),
                                                      fields[row:row + COLUMNS]):
                with column:
                    make = several if meta.many else single
                    values[field] = make(field, meta, default, f"{prefix}_{field}",
                                         options.get(field, ()))

    draw([f for f in shown if not f[1].advanced])
    advanced = [f for f in shown if f[1].advanced]
    if advanced:
        with st.expander("More settings"):
            draw(advanced)
    return values
