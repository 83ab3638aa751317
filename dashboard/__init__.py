"""The dashboard's UI helpers: session state, engine access, charts and shared widgets.

Nothing here imports torch (the first page must draw within seconds of ``make run``); the
engine modules it imports are torch-free at import time, and heavy work runs in the job
queue's worker process.
"""
