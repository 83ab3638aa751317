"""The one exception that stops work its owner cancelled (or that reached its time limit)."""


class Cancelled(Exception):
    """Raised between phases, files or chunks when ``should_stop()`` says so."""
