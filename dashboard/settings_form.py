"""Widgets generated from ``setting(...)`` metadata (``optimizers.settings.Setting``): one per
setting, with the setting's own bounds, choices, step and help, so a page's ranges are the
config's. The Experiment page's technique controls (``technique_form``) and the Distributed
page's form (``config_form``, from ``DistributedConfig``'s fields) are both drawn with these.

A widget returns the value as the config takes it (a number, a name, a tuple for a setting
of several values) or, for text that does not parse, the text itself: the config's own check
then refuses it in one line, which the page shows with ``st.error``.
"""

from __future__ import annotations

from dataclasses import replace

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


def _setting_text(meta, value) -> str:
    """A setting's value as the URL writes it (``links``): 0.7, l1, on, 3,32,32, default."""
    from dashboard import links
    if value is None:
        return links.DEFAULT
    if meta.kind == "bool":
        return links.show_bool(value)
    if isinstance(value, (tuple, list)):
        return ",".join(links.show_number(v) if isinstance(v, (int, float)) else str(v)
                        for v in value)
    return links.show_number(value) if isinstance(value, (int, float)) else str(value)


def _one_parser(meta, options=()):
    """URL text -> one value of the setting, within what its widget offers."""
    from dashboard import links

    def parse(text: str):
        if meta.nullable and text == links.DEFAULT:
            return None
        if meta.kind == "bool":
            return links.parse_bool(text)
        if meta.kind in ("choice", "text"):
            return links.parse_choice(text, meta.choices if meta.kind == "choice" else
                                      (meta.suggested or options))
        low, high, _ = number_range(meta)
        return links.parse_number(text, low, high, meta.integer)
    return parse


def _tuple_parser(meta):
    """URL text -> a fixed-length tuple (C,H,W), as its text box holds it."""
    def parse(text: str):
        value = _values(text, meta.integer)
        try:
            meta.check("setting", "value", value)  # the setting's own check
        except ValueError:
            raise ValueError(f"must be {meta.accepted()}, got {text!r}") from None
        return text
    return parse


def single(field, meta, default, key, options=(), *, url=None, name=None, title=None,
           none_means: str | None = None, disabled: bool = False):
    """One value for a setting (a tuple of a fixed length is typed as a,b,c). ``url``: a
    ``links.UrlForm`` the widget reads its first value from and writes its value to, as
    parameter ``name``; ``title``: the widget's label, where the field's name reads badly;
    ``none_means``: what the empty value means here, where the page knows better than the
    setting's generic words (the student this model gets)."""
    label_, help_ = title or label(field), help_text(meta)
    first = default
    if url is not None:
        parse = _tuple_parser(meta) if meta.length is not None else _one_parser(meta, options)
        first = url.initial(name, key, parse, default)
    if none_means is not None:
        meta = replace(meta, none_means=none_means)
    value = _single(label_, help_, meta, default, first, key, options, disabled)
    if url is not None:
        url.keep(name, _setting_text(meta, value), _setting_text(meta, default))
    return value


def unless_set(key: str, value: bool) -> bool:
    """A switch's default where the page set its value through session state (a default that
    followed the model, a fix's click): that value stands, and False as the default keeps
    Streamlit from logging both as a conflict."""
    return False if key in st.session_state else value


def _single(name, help_, meta, default, first, key, options, disabled=False):
    if meta.kind == "bool":
        return st.toggle(name, value=unless_set(key, bool(first)), key=key, help=help_,
                         disabled=disabled)
    if meta.length is not None:
        shown = first if isinstance(first, str) else (
            "" if first is None else ",".join(map(str, first)))
        empty = f" (empty: {meta.none_means})" if meta.nullable else ""
        return _values(st.text_input(f"{name}{empty}", shown, key=key, help=help_,
                                     placeholder=meta.metavar), meta.integer)
    if meta.kind in ("choice", "text"):
        # A choice's menu may be narrowed by the page (``options`` among its choices: the
        # image model's map techniques of a setting that holds both families').
        listed = list(options) if meta.kind == "text" else \
            [o for o in options if o in meta.choices] or list(meta.choices)
        choices = ([AUTO] if meta.nullable else []) + listed
        if default is not None and default not in choices:
            choices.insert(0, default)
        picked = first if first is not None else (AUTO if meta.nullable else choices[0])
        if picked not in choices:
            picked = default if default is not None else choices[0]
        shown = {AUTO: f"default ({meta.none_means})"}
        value = st.selectbox(name, choices, key=key, help=help_, index=choices.index(picked),
                             format_func=lambda o: shown.get(o, o))
        return None if value == AUTO else value
    low, high, step = number_range(meta)
    if meta.nullable:
        return st.number_input(f"{name} (empty: {meta.none_means})", low, high, first, step,
                               key=key, help=help_)
    if (high - low) / step <= MAX_SLIDER_STEPS:
        return st.slider(name, low, high, type(low)(first), step, key=key, help=help_)
    return st.number_input(name, low, high, type(low)(first), step, key=key, help=help_)


def several(field, meta, default, key, options=(), *, url=None, name=None):
    """Several values for a setting: picked among its choices (or suggested values), or a
    range and a number of points. A technique's sweep, a config's ``many`` setting. With
    ``url``, the values travel as parameter ``name``: ``l1,channel`` or ``0.1:0.9:5``."""
    title = label(field) + (" (sweep)" if meta.sweep else "")
    help_ = help_text(meta)
    defaults = list(default) if isinstance(default, tuple) else [default]
    if meta.kind in ("choice", "text") or meta.suggested:
        listed = list(meta.choices if meta.kind == "choice" else meta.suggested
                      if meta.suggested else options)
        if meta.nullable:
            listed = [AUTO] + listed
        first = [AUTO if d is None else d for d in defaults]
        if url is not None:
            one = _one_parser(meta, options)
            first = url.initial(name, f"{key}_multi", lambda text: [
                AUTO if v is None else v for v in (one(t) for t in text.split(","))], first)
        picked = st.multiselect(title, listed, key=f"{key}_multi", help=help_, default=first)
        values = tuple(None if p == AUTO else p for p in picked)
        if url is not None:
            url.keep(name, ",".join(_setting_text(meta, v) for v in values),
                     ",".join(_setting_text(meta, d) for d in defaults))
        return values
    low, high, step = number_range(meta)
    start = type(low)(defaults[0] if defaults[0] is not None else low)
    # The setting's own sweep range where it declares one (where the trade-off happens).
    span = tuple(type(low)(v) for v in meta.sweep_range) if meta.sweep_range else \
        (low, max(start, low + step))
    count = min(5, MAX_POINTS)
    default_text = None
    if url is not None:
        from dashboard import links
        default_text = links.show_range(*span, count)
        span, count = url.initial(name, f"{key}_range", lambda text: links.parse_range(
            text, low, high, meta.integer, MAX_POINTS), (span, count))
    a, b = st.columns([3, 1])
    # "Ratio (sweep from, to)": the range's own title, not the menu's "(sweep)" twice.
    span_title = f"{label(field)} ({'sweep ' if meta.sweep else ''}from, to)"
    lo, hi = a.slider(span_title, low, high, tuple(type(low)(v) for v in span), step,
                      key=f"{key}_range", help=help_)
    count = b.number_input("points", 1, MAX_POINTS, int(count), 1, key=f"{key}_count")
    if url is not None:
        url.keep(name, links.show_range(lo, hi, int(count)), default_text)
    from benchmarks.spec.plan import expand_range
    # Whole numbers over a short range repeat when rounded (0, 0, 1, 2, 2): once each.
    return tuple(dict.fromkeys(expand_range(lo, hi, int(count), meta.integer)))


def url_name(field: str, meta) -> str:
    """A config field's URL parameter: its command-line flag's name where it has one
    (``--runtime`` -> ``runtime``, ``--eval-batch-size`` -> ``eval_batch_size``), so a link
    and a command say the same words; else the field's."""
    return meta.flag.lstrip("-").replace("-", "_") if meta.flag else field


def config_url_names(config_type) -> list[str]:
    """The URL parameters ``config_form(config_type, ..., url=...)`` reads and writes."""
    return [url_name(f, m) for f, m, _ in setting_fields(config_type) if m.form and not m.hidden]


def config_form(config_type, prefix: str, options: dict | None = None, url=None) -> dict:
    """A widget per field of a ``setting(...)``-declared config that a page may set (not
    ``form=False``, not ``hidden``), in rows of COLUMNS; ``advanced`` ones under "More
    settings". ``options``: a text field's menu (``{"model": [...]}``), or a choice's narrowed.
    Widget keys:
    ``{prefix}_{field}`` (``_multi`` for several values). ``url``: a ``links.UrlForm`` the
    widgets read their first values from and write to (``config_url_names``). Returns
    {field: value}."""
    options = options or {}
    shown = [(f, m, d) for f, m, d in setting_fields(config_type) if m.form and not m.hidden]
    values = {}

    def draw(fields):
        for row in range(0, len(fields), COLUMNS):
            for column, (field, meta, default) in zip(st.columns(COLUMNS),
                                                      fields[row:row + COLUMNS]):
                with column:
                    make = several if meta.many else single
                    carried = {} if url is None else dict(url=url,
                                                          name=url_name(field, meta))
                    values[field] = make(field, meta, default, f"{prefix}_{field}",
                                         options.get(field, ()), **carried)

    draw([f for f in shown if not f[1].advanced])
    advanced = [f for f in shown if f[1].advanced]
    if advanced:
        with st.expander("More settings"):
            draw(advanced)
    return values
