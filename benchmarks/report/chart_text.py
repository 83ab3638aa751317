"""Text is never markup in a chart either: every string a figure holds that the product did not
write itself (a variant's, layer's or model's name, a stored row, a file's text) is shown as
text, never as Plotly's pseudo-HTML.

Plotly draws ``<a href>``, ``<b>``, ``<br>``, ``<span style>``... in every text it renders:
category values and tick labels, trace and legend names, hover text and what a hover template
substitutes (``%{customdata[0]}``), titles, annotations. A layer named
``<a href="https://evil.example">Sign in again</a>`` would draw that link in the app's charts
and in the offline report. Plotly decodes the entities ``&lt;``, ``&gt;`` and ``&amp;`` back
to the characters it shows, so escaping those three characters keeps the text as it was and
starts no tag.

One seam: ``safe_figure`` walks a finished figure (every trace's and the layout's
properties, however deep) and escapes every string but two kinds the product writes itself:

- templates (``hovertemplate``, ``texttemplate``... any property named ``*template``, and the
  layout's theme ``template``): the product's own ``<br>`` and ``<extra>``; data reaches a
  template only through what it substitutes, which is escaped. A tag in a template that is
  not one of the harmless layout tags (``SAFE_TAGS``) is escaped there too, so a name an
  f-string put into a template cannot draw a link or a style either;
- ``Markup``: a string the product marked as its own markup (a ``<br>`` joining lines of a
  hover text it wrote, a colour bar's two-line title), built with ``markup()``/``join()``,
  which escape every value they are given.

The pages hand every figure to Streamlit through one function (``dashboard.charts.show``) and
the report writes every figure through one (``benchmarks.views.html._figure_json``); both call
``safe_figure``. Plotly only: no Streamlit, no torch.
"""

from __future__ import annotations

import re
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import plotly.graph_objects as go

# Layout tags a template may keep: a line break, the hover box's side label, emphasis and
# scripts. None of them links, styles or loads anything.
SAFE_TAGS = re.compile(r"</?(?:br|extra|b|i|em|sup|sub)\s*/?>", re.IGNORECASE)
_TAG = re.compile(r"<[^<>]*>?")
# Set on a figure once its text is escaped: a cached figure handed over again is not escaped
# twice (an "&lt;" would then show as itself). The lock: sessions share cached figures.
_DONE = "_compression_bench_text_safe"
_LOCK = threading.Lock()


class Markup(str):
    """A string the product wrote as Plotly markup (its own ``<br>``): kept as written."""


def escape(value) -> str:
    """``value`` as text Plotly shows as written: ``&``, ``<`` and ``>`` as entities."""
    text = "" if value is None else str(value)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def markup(template: str, *values) -> Markup:
    """``template`` (the product's markup, ``str.format`` fields) with ``values`` escaped."""
    return Markup(template.format(*(escape(v) for v in values)))


def join(separator: str, values) -> Markup:
    """``values`` escaped, joined by the product's ``separator`` (``"<br>"``)."""
    return Markup(separator.join(v if isinstance(v, Markup) else escape(v) for v in values))


def safe_template(template: str) -> str:
    """A template with every tag but ``SAFE_TAGS`` escaped (its ``%{...}`` fields kept)."""
    return _TAG.sub(lambda m: m.group(0) if SAFE_TAGS.fullmatch(m.group(0))
                    else escape(m.group(0)), template)


def _is_template(key: str) -> bool:
    return key.endswith("template")


def _safe(value, template: bool = False):
    """``value`` with every string escaped (a template's tags only); lists, tuples, dicts
    and arrays of strings walked. Numbers, colours and other values come back as they were."""
    if isinstance(value, Markup):
        return value
    if isinstance(value, str):
        return safe_template(value) if template else escape(value)
    if isinstance(value, dict):
        return {key: item if key == "template" else _safe(item, template or _is_template(key))
                for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_safe(item, template) for item in value]
    kind = getattr(getattr(value, "dtype", None), "kind", None)
    if kind in ("U", "S", "O"):  # numpy strings or objects (customdata of mixed types)
        return [_safe(item.decode() if isinstance(item, bytes) else item, template)
                for item in value.tolist()]
    return value


def _changed(props: dict) -> dict:
    """The top-level properties whose escaped value differs, escaped."""
    out = {}
    for key, item in props.items():
        if key == "template":  # the layout's theme: the product's, and large
            continue
        safe = _safe(item, _is_template(key))
        if _differs(safe, item):
            out[key] = safe
    return out


def _differs(safe, item) -> bool:
    if isinstance(item, str) or isinstance(safe, str):
        return safe != item
    if isinstance(safe, dict):
        return not isinstance(item, dict) or any(_differs(safe[k], item.get(k)) for k in safe)
    if isinstance(safe, list):
        items = item.tolist() if hasattr(item, "tolist") else list(item)
        return len(items) != len(safe) or any(_differs(s, i) for s, i in zip(safe, items))
    return False


def safe_figure(fig: go.Figure) -> go.Figure:
    """``fig`` with every string in it shown as text (module docstring), escaped in place once;
    returned for chaining."""
    with _LOCK:
        if getattr(fig, _DONE, False):
            return fig
        plain = fig.to_plotly_json()
        for trace, props in zip(fig.data, plain["data"]):
            changed = _changed(props)
            if changed:
                trace.update(changed, overwrite=True)
        changed = _changed(plain["layout"])
        if changed:
            fig.layout.update(changed, overwrite=True)
        setattr(fig, _DONE, True)
    return fig


def unescape(text: str) -> str:
    """What ``escape`` made back into the text (a chart's selection event names a point by
    the escaped value it was given)."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
