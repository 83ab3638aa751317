"""What a command gives back: its exit status, and the files it will write, checked before
anything runs (a typo in ``--json`` must not cost a finished sweep) and written whole or not
at all (``write_output``: a full disk is one line and leaves no partial file)."""

from __future__ import annotations

from pathlib import Path

# 0 every variant (or run) succeeded, 1 some failed (each says why; the others are reported
# and stored), 2 the input was invalid and nothing ran (one line on stderr, no traceback).
EXIT_OK, EXIT_VARIANT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
EXIT_INTERRUPTED = 130


def check_writable(path: str | None, flag: str) -> None:
    """An output file's name, through the one path check (``folders.check_user_path``)."""
    if path is None:
        return
    from benchmarks.spec.folders import check_user_path
    target = check_user_path(path, flag)
    if target.is_dir():
        raise ValueError(f"{flag} {path} is a directory; give a file name")


def write_output(path: str, text: str) -> None:
    """``--json``/``--csv``/``--html`` written through a temporary file renamed into place;
    a full disk raises ``DiskFull`` (one line, exit 2) and leaves the old file, if any."""
    from benchmarks.spec.atomic import write_text
    write_text(Path(path).expanduser(), text)
