"""Which variant of a run the page is about. One choice, made by a click on a table row or a
Pareto point, by the export panel's menu or by the link's ``?variant=``; it selects that
variant everywhere on the page: its details, its per-layer figures, the export panel and the
URL. Held in session state under ``{key}-selected`` (``key``: the run's view on the page)."""

from __future__ import annotations

import streamlit as st

from benchmarks.report.chart_text import unescape


def state_key(key: str) -> str:
    return f"{key}-selected"


def selected(key: str, names: list[str], default: str | None) -> str | None:
    """The selected variant: the last one picked, else ``default``, else the first."""
    value = st.session_state.get(state_key(key))
    if value not in names:
        value = default if default in names else (names[0] if names else None)
        st.session_state[state_key(key)] = value
    return value


def pick(key: str, name: str | None) -> None:
    if name:
        st.session_state[state_key(key)] = name


def row_picked(event, names: list[str]) -> str | None:
    """The variant of a table's selection event (``st.dataframe(on_select=...)``)."""
    rows = ((event or {}).get("selection") or {}).get("rows") or []
    return names[rows[0]] if rows and 0 <= rows[0] < len(names) else None


def point_picked(event) -> str | None:
    """The variant of a chart's selection event (``charts.show(fig, on_select=...)``): the
    first selected point that names one (every figure puts the name first in customdata, as
    escaped text: ``benchmarks.report.chart_text``)."""
    for point in ((event or {}).get("selection") or {}).get("points") or []:
        data = point.get("customdata")
        if isinstance(data, (list, tuple)) and data:
            return unescape(str(data[0]))
        if isinstance(data, str):
            return unescape(data)
    return None


def on_table(key: str, table_key: str, names: list[str]):
    """The callback of the comparison table: a row clicked selects its variant."""
    def picked():
        pick(key, row_picked(st.session_state.get(table_key), names))
    return picked


def on_chart(key: str, chart_key: str):
    """The callback of a chart: a point clicked selects its variant."""
    def picked():
        pick(key, point_picked(st.session_state.get(chart_key)))
    return picked


def on_menu(key: str, menu_key: str):
    """The callback of a menu of variants (the export panel's)."""
    def picked():
        pick(key, st.session_state.get(menu_key))
    return picked
