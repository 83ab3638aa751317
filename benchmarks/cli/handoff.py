"""What leaves the tool: ``report`` (a stored run as one self-contained HTML file) and
``export`` (a variant's model as files, each reloaded and checked)."""

from __future__ import annotations

import sys
from pathlib import Path

from benchmarks.cli.outputs import EXIT_OK, check_writable, write_output


def _stored_run(store, run_id: str, flag: str = "RUN_ID") -> dict:
    run = store.run(run_id)
    if run is None:
        raise ValueError(f"{flag} {run_id!r} is not in the store {store.path}; `history` "
                         f"lists the runs")
    return run


def cmd_report(args) -> int:
    from benchmarks.report.document import RunReport
    from benchmarks.views.html import render
    from benchmarks.store.database import ResultsStore
    check_writable(args.html, "--html")
    store = ResultsStore(args.store)
    run = _stored_run(store, args.run_id)
    if run.get("kind") == "lm":  # a language model's cells, in its own terms
        from benchmarks.views.lm import render_lm_html
        if args.compare is not None:
            raise ValueError("--compare sets two sweeps side by side; a language model's run "
                             "is reported alone")
        html = render_lm_html(run)
        write_output(args.html, html)
        print(f"report of run {args.run_id} written to {args.html} "
              f"({len(html.encode()) / 2**20:.2f} MB)", file=sys.stderr)
        return EXIT_OK
    report = RunReport.from_stored(run)
    compare = None if args.compare is None else RunReport.from_stored(
        _stored_run(store, args.compare, "--compare"))
    html = render(report, compare)
    write_output(args.html, html)
    print(f"report of run {args.run_id} written to {args.html} "
          f"({len(html.encode()) / 2**20:.2f} MB)", file=sys.stderr)
    return EXIT_OK


def check_out_folder(out: str, force: bool) -> None:
    """``--out`` must be new or empty unless ``--force``: an export never replaces files
    silently."""
    from benchmarks.export.files import check_folder
    folder = check_folder(out)  # the one path check: name lengths, characters, its folder
    if not folder.is_dir() or force:
        return
    present = sorted(p.name for p in folder.iterdir())
    if present:
        shown = ", ".join(present[:3]) + (", ..." if len(present) > 3 else "")
        raise ValueError(f"--out {out} is not empty ({len(present)} entries: {shown}); give a "
                         f"new or empty folder, or --force to replace the export's files there")


def cmd_export(args) -> int:
    check_out_folder(args.out, args.force)  # before torch loads: refused at once
    from benchmarks.export.variant import export_variant
    from benchmarks.store.database import ResultsStore
    card = export_variant(ResultsStore(args.store), args.run_id, args.variant, args.out)
    for name, entry in card["formats"].items():
        check = entry.get("verification") or {}
        if entry["status"] == "written":
            same = "same predictions" if check.get("same_predictions") else \
                f"accuracy {100 * check['accuracy']:.2f}%" if "accuracy" in check else "checked"
            print(f"{name:<12} {entry['file']:<18} written, reloaded: {same}")
        else:
            print(f"{name:<12} {'-':<18} not exported: {entry['reason']}")
    print(f"model card: {Path(args.out) / 'model_card.json'}", file=sys.stderr)
    return EXIT_OK
