"""The dashboard's charts: the engine's figure builders (``benchmarks.report.figures``).

One copy serves the pages and the HTML report (``python -m benchmarks report``), so the report
holds exactly the charts the Results page draws. Plotly only: no Streamlit, no torch.
"""

from benchmarks.report.figures import *  # noqa: F401,F403
