"""``compression-bench`` (= ``python -m benchmarks``): the one parser (``parser``), the
commands (``run``; ``recommend``; ``list``, ``history`` and ``jobs`` in ``listing``; ``report`` and
``export`` in ``handoff``; ``distributed``; ``sensitivity``) and here the one error boundary.

A table goes to stdout, progress to stderr. Exit status: 0 every variant succeeded, 1 some
variant failed (its error says why; the others are reported and stored), 2 the input was
invalid and nothing ran, or the environment refused (memory, a full disk: one line on stderr
naming the folder and its free space), never a traceback.
"""

from __future__ import annotations

import errno
import sys

from benchmarks.cli.outputs import EXIT_BAD_INPUT, EXIT_INTERRUPTED
from benchmarks.spec.atomic import DiskFull
from benchmarks.spec.cpu_env import clear_inherited
from optimizers.errors import described, first_line


def _command(name: str):
    """The command's function, imported when it runs (``list`` need not import the runner)."""
    if name == "run":
        from benchmarks.cli.run import cmd_run
        return cmd_run
    if name == "recommend":
        from benchmarks.cli.recommend import cmd_recommend
        return cmd_recommend
    if name in ("list", "history", "jobs"):
        from benchmarks.cli import listing
        return {"list": listing.cmd_list, "history": listing.cmd_history,
                "jobs": listing.cmd_jobs}[name]
    if name in ("report", "export"):
        from benchmarks.cli import handoff
        return {"report": handoff.cmd_report, "export": handoff.cmd_export}[name]
    if name == "sensitivity":
        from benchmarks.cli.sensitivity import cmd_sensitivity
        return cmd_sensitivity
    if name == "mcp":
        from benchmarks.cli.mcp import cmd_mcp
        return cmd_mcp
    from benchmarks.cli.distributed import cmd_distributed
    return cmd_distributed


# Flags whose value may start with '-' (a negative margin is refused by its own check, with
# its own message, not argparse's "expected one argument").
SIGNED_VALUES = ("--within",)


def _signed(argv: list[str]) -> list[str]:
    out, i = [], 0
    while i < len(argv):
        if argv[i] in SIGNED_VALUES and i + 1 < len(argv) and argv[i + 1].startswith("-") \
                and argv[i + 1][1:2].isdigit():
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


def _warn_unreadable(show: bool = True) -> None:
    """A stored row the command read and left out (truncated JSON): one line each, naming the
    store, the run and the row, whatever the command; the rest of its output stands.
    ``show`` False forgets what an earlier command in this process met."""
    database = sys.modules.get("benchmarks.store.database")
    for line in database.unreadable_lines(clear=True) if database is not None else ():
        if show:
            print(f"warning: {line}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    # Before torch: native work runs on this machine's own instruction sets, whatever the
    # shell set (benchmarks.spec.cpu_env says why; the environment card records it).
    for name, value in clear_inherited().items():
        print(f"warning: {name}={value} from the environment cleared: native cells run on "
              f"this machine's own instruction sets (--isa previews a cap)", file=sys.stderr)
    argv = _signed(list(sys.argv[1:] if argv is None else argv))
    from benchmarks.cli.parser import build_parser
    from benchmarks.measure.environment import quiet_library_noise
    quiet_library_noise()
    try:
        args = build_parser().parse_args(argv)
        _warn_unreadable(show=False)
        try:
            return _command(args.command)(args)
        finally:
            _warn_unreadable()
    except DiskFull as exc:  # the folder and its free space, in one line
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ValueError as exc:  # bad input: one line, nothing ran
        print(f"error: {first_line(exc, 1000)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        # A path the one check (spec.folders.check_user_path) did not see: still one line.
        if exc.errno not in (errno.ENAMETOOLONG, errno.EACCES, errno.EROFS, errno.ENOTDIR):
            raise
        print(f"error: {first_line(exc, 1000)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (RuntimeError, MemoryError) as exc:
        # The environment's fault (STYLE: RuntimeError), e.g. an allocator refusing memory
        # while data loads: still one line, never a traceback.
        print(f"error: {described(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def entry_point() -> None:
    """The ``compression-bench`` console script."""
    sys.exit(main())
