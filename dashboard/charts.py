"""The dashboard's charts: the engine's figure builders (``benchmarks.report.figures``) and the
data-parallel benchmark's (``benchmarks.views.scaling``), and ``show``, the one place a page
hands a figure to Streamlit.

One copy serves the pages and the HTML report (``python -m benchmarks report``), so the report
holds exactly the charts the Results page draws. No torch.
"""

from benchmarks.report.chart_text import safe_figure
from benchmarks.report.figures import *  # noqa: F401,F403
from benchmarks.report.figures import PLOTLY_CONFIG
from benchmarks.distributed.record import scaling_table  # noqa: F401
from benchmarks.views.scaling import bytes_chart, efficiency_chart, throughput_chart  # noqa: F401


def show(fig, **kwargs):
    """``st.plotly_chart(fig, **kwargs)`` with every text in the figure shown as text, never as
    Plotly's markup (``benchmarks.report.chart_text``: a layer named ``<a href=...>`` draws
    no link); the modebar's ``PLOTLY_CONFIG`` unless ``config`` is given. Every page draws its
    charts through here (a test holds the pages to it)."""
    import streamlit as st
    kwargs.setdefault("config", PLOTLY_CONFIG)
    return st.plotly_chart(safe_figure(fig), **kwargs)
