"""The results store: SQLite in WAL mode (``database.ResultsStore``), and the one run
lifecycle every writer shares (``recorder.RunRecorder``). Torch-free: the dashboard reads it."""

__all__ = ["database", "recorder"]
