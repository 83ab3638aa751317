"""The compression trade-off dashboard: `make run` (streamlit run serve.py, which serves this).

Page config, the shared sidebar (the worker's device card, My jobs) and navigation, drawn by
``dashboard.shell``. Pages are thin: they read state, call the engine through the job queue,
and render with dashboard/. Nothing here imports torch: the sweep runs in the queue's worker
process.
"""

from dashboard import shell

shell.route()
