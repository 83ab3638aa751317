"""The service side of the engine: the SQLite results store and the job queue whose worker
process runs the dashboard's sweeps. Torch-free at import: the dashboard imports both."""
