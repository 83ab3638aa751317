"""The dashboard's charts: the engine's figure builders (``benchmarks.report.figures``) and the
data-parallel benchmark's (``benchmarks.views.scaling``).

One copy serves the pages and the HTML report (``python -m benchmarks report``), so the report
holds exactly the charts the Results page draws. Plotly only: no Streamlit, no torch.
"""

from benchmarks.report.figures import *  # noqa: F401,F403
from benchmarks.distributed.record import scaling_table  # noqa: F401
from benchmarks.views.scaling import bytes_chart, efficiency_chart, throughput_chart  # noqa: F401
