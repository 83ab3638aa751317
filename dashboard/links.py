"""The URL as state: a link is the experiment, or the view of a run.

A page makes one ``UrlForm`` per run, naming every parameter it may take (generated from the
same metadata its widgets are drawn from: ``technique_form.url_names``,
``experiment_form.URL_NAMES``). Each widget asks ``initial(name, key, parse, default)`` for
its first value: the URL's where the link has one that parses and the widget is drawn for the
first time in this session, else its default; and says what it holds with ``keep(name,
text, default)``. ``finish()`` at the end of the run writes the URL from what the widgets
hold (values at their default are left out, so a link stays short) and shows one warning
naming every parameter it ignored: unknown names, values that do not parse or are out of
range. A link never submits anything: a job still needs its button's click.

Values read as on the command line: ``prune.ratio=0.7``, a swept number as
``prune.ratio=0.1:0.9:5`` (from, to, points), several choices as ``prune.method=l1,channel``,
switches as ``on``/``off``, a nullable setting at its default as ``default``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import streamlit as st

from dashboard.markup import md  # a link's names and values are text, never Markdown
from optimizers.errors import first_line

# Parameters the URL carries for other reasons: the session's key and a shared run's id
# (dashboard.state); no page's form reads or removes them.
RESERVED = ("session", "run")
DEFAULT = "default"   # a nullable setting left to its default
WRITTEN = "cb_url_written"  # session state: what a page last wrote into the URL
FIRST = "cb_url_first"      # session state: the first value each live widget was drawn with
ON, OFF = "on", "off"


class UrlForm:
    """One run of a page's widgets against its URL."""

    def __init__(self, page: str, known: Iterable[str], *, reserved: Iterable[str] = ()):
        self.reserved = set(RESERVED) | set(reserved)
        self.known = set(known)
        self.memory = f"{WRITTEN}:{page}"
        params = st.query_params
        url = {name: params.get(name) for name in params if name not in self.reserved}
        written = st.session_state.get(self.memory) or {}
        if not url and written:
            # Back on the page from another: the form as it was left (page links carry no
            # parameters, and the widgets' state went with the page).
            self.given = dict(written)
        else:
            # What this session wrote itself is no news: what a link brought is read once.
            self.given = {name: text for name, text in url.items()
                          if written.get(name) != text}
        self.held: dict[str, tuple[str | None, str | None]] = {}
        self.bad: dict[str, str] = {}
        self.slot = st.empty()  # the one warning, drawn where the page begins

    def initial(self, name: str, key: str | None, parse: Callable[[str], object], default):
        """The widget's first value. ``parse`` raises ValueError for text it refuses; the
        widget then starts at ``default`` and the parameter is named in the warning."""
        text = self.given.get(name)
        first = st.session_state.setdefault(FIRST, {})
        if key is not None and key in st.session_state:
            # The widget lives: its default stays what it was first drawn with. (A browser
            # sends back only the widgets a person touched; the others take their default
            # again, so a default that changed would undo what the link set.)
            return first.get(key, default)
        first.pop(key, None)
        if text is None:
            return default
        try:
            value = parse(text)
        except ValueError as exc:
            self.bad.setdefault(name, first_line(exc))
            return default
        if key is not None:
            first[key] = value
        return value

    def refuse(self, name: str, why: str) -> None:
        """A parameter the page found unusable after parsing (a folder that is not there)."""
        if name in self.given:
            self.bad.setdefault(name, why)

    def keep(self, name: str, text: str | None, default: str | None = None) -> None:
        """What a widget holds now, as the URL's text; ``None``: nothing to carry."""
        self.held[name] = (text, default)

    def ignored(self) -> dict[str, str]:
        """Every parameter of the link this page could not use, and why."""
        out = dict(self.bad)
        for name in self.given:
            if name not in self.known:
                out.setdefault(name, "not a setting of this page")
        return out

    def finish(self) -> None:
        ignored = self.ignored()
        if ignored:
            self.slot.warning(
                "This link's " + "; ".join(f"**{md(name)}** ({md(why)})" for name, why in
                                           ignored.items())
                + (" was ignored: that field shows its default." if len(ignored) == 1 else
                   " were ignored: those fields show their defaults."))
        wanted = {name: text for name, (text, default) in self.held.items()
                  if text is not None and text != default}
        st.session_state[self.memory] = wanted
        params = st.query_params
        for name in list(params):
            if name not in self.reserved and name not in wanted:
                del params[name]
        for name, text in wanted.items():
            if params.get(name) != text:
                params[name] = text


# -- text <-> values ---------------------------------------------------------------------------

def show_bool(value) -> str:
    return ON if value else OFF


def parse_bool(text: str) -> bool:
    word = text.strip().lower()
    if word in (ON, "true", "1", "yes"):
        return True
    if word in (OFF, "false", "0", "no"):
        return False
    raise ValueError(f"must be {ON} or {OFF}, got {text!r}")


def show_number(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def parse_number(text: str, low: float, high: float, integer: bool):
    """A number within [low, high] (the widget's own range), an integer where it must be."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"must be a number, got {text!r}") from None
    if integer:
        if not value.is_integer():
            raise ValueError(f"must be a whole number, got {text!r}")
        value = int(value)
    if not low <= value <= high:
        raise ValueError(f"must be from {show_number(low)} to {show_number(high)}, got {text}")
    return value


def parse_choice(text: str, options, what: str = "one of the menu's"):
    """One of ``options`` (compared as the URL writes them)."""
    by_text = {str(option): option for option in options}
    if text not in by_text:
        listed = ", ".join(list(by_text)[:8]) + (", ..." if len(by_text) > 8 else "")
        raise ValueError(f"must be {what} ({listed}), got {text!r}")
    return by_text[text]


def show_range(low, high, count) -> str:
    return f"{show_number(low)}:{show_number(high)}:{count}"


def parse_range(text: str, low: float, high: float, integer: bool, max_points: int):
    """``from:to:points`` (or one number: one point) -> ((from, to), points)."""
    parts = text.split(":")
    if len(parts) == 1:
        value = parse_number(parts[0], low, high, integer)
        return (value, value), 1
    if len(parts) != 3:
        raise ValueError(f"must be FROM:TO:POINTS, got {text!r}")
    start, stop = (parse_number(p, low, high, integer) for p in parts[:2])
    if start > stop:
        raise ValueError(f"must run from low to high, got {text!r}")
    return (start, stop), parse_number(parts[2], 1, max_points, True)
