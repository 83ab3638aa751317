"""The service side: the job queue the dashboard submits to (``queue``), its supervisor thread
(``supervisor``) and the worker process that runs each job (``worker``). Torch-free at import
(the dashboard imports the queue); only the worker loads the engine."""

__all__ = ["queue", "supervisor", "worker"]
