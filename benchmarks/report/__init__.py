"""What a run says: results, how sure each comparison is, and every view of them.

A measured variant with its raw samples kept (``results.VariantResult``), the statistics
(``stats``: Wilson intervals, exact McNemar, t intervals, correctness bit strings), the run
document behind the CLI's table, the JSON, the CSV and the pages (``document.RunReport``),
plotly figures from comparison rows (``figures``: no torch, no Streamlit) and the
self-contained HTML report (``html`` and ``templates/``).
"""

__all__ = ["document", "figures", "html", "results", "stats"]
