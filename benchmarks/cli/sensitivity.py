"""``sensitivity``: where to compress. A per-group map of one technique's levels with paired
intervals (the rows on stdout, most sensitive first; the run in the store; the JSON with
``--json``) and, with ``--max-drop``, the schedule chosen from it, written as JSON for
``run --schedule FILE``. Its flags are ``SensitivityConfig``'s fields plus the baseline's
(model, data, budgets, or ``--from-run``: a stored run's baseline, from the cache)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from benchmarks.cli.outputs import EXIT_OK, EXIT_VARIANT_FAILED, check_writable
from benchmarks.cli.parser import config_from_args

DEFAULT_SCHEDULE_FILE = "schedule.json"


def baseline_spec(args):
    """The sweep whose baseline is mapped: the flags', or a stored run's (``--from-run``)."""
    from benchmarks.sensitivity.config import baseline_spec as from_stored
    from benchmarks.spec.sweep import SweepSpec
    if args.from_run:
        from benchmarks.store.database import ResultsStore
        run = ResultsStore(args.store).run(args.from_run)
        if run is None or run.get("kind", "sweep") != "sweep":
            raise ValueError(f"--from-run {args.from_run}: no such sweep in the store")
        return from_stored(run["spec"], threads=args.threads)
    return SweepSpec(model=args.model, dataset=args.dataset, checkpoint=args.checkpoint,
                     input_shape=args.input_shape, device=args.device,
                     batch_size=args.batch_size, epochs=args.epochs, seed=args.seed,
                     data_root=args.data_root, download=args.download, threads=args.threads,
                     min_time_s=args.min_time, normalize=args.normalize, weights=args.weights,
                     labels=args.labels)


def cmd_sensitivity(args) -> int:
    from benchmarks.sensitivity.config import SensitivityConfig
    config = config_from_args(SensitivityConfig, args)
    spec = baseline_spec(args)
    from benchmarks.cli.lm_run import wants_lm
    if wants_lm(spec):  # a language model: its layers or projection kinds
        return cmd_sensitivity_lm(args, config, spec)
    config.check_family("image")
    from benchmarks.zoo.models import preflight
    preflight(spec.model, spec.weights, spec.download)
    check_writable(args.json_file, "--json")
    out = args.out or (DEFAULT_SCHEDULE_FILE if config.max_drop else None)
    if out and not config.max_drop:
        raise ValueError("--out writes the schedule --max-drop chooses; give --max-drop")
    check_writable(out, "--out")

    from benchmarks.run.cache import WeightsCache
    from benchmarks.run.runner import prepare_sweep
    from benchmarks.sensitivity.mapper import record_map
    sweep = prepare_sweep(spec, cache=WeightsCache(enabled=not args.no_cache))
    for warning in sweep.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    progress = None if args.quiet else _progress
    store = None
    if not args.no_store:
        from benchmarks.store.database import ResultsStore
        store = ResultsStore(args.store)
    if store is None:
        from benchmarks.sensitivity.mapper import build_map
        result = build_map(sweep, config, on_progress=progress)
    else:
        recorder = store.record(model=spec.model, dataset=spec.dataset,
                                device=str(sweep.device), spec=map_spec(spec, config, args),
                                environment=sweep.environment, kind="sensitivity")
        with recorder:
            result = record_map(sweep, config, recorder, on_progress=progress)
        print(f"map {recorder.run_id} stored in {store.path}", file=sys.stderr)
    if not args.quiet:
        print(file=sys.stderr)
    print(result.table())
    if args.json_file:
        Path(args.json_file).write_text(json.dumps(result.document(sweep.environment),
                                                   indent=2, default=str))
    if result.schedule is not None:
        from benchmarks.sensitivity.schedule import write_schedule
        write_schedule(out, result.schedule)
        predicted = result.schedule["predicted"]
        checked = result.schedule.get("checked") or {}
        whole = "" if checked.get("accuracy_change") is None else \
            f"; the whole schedule {checked['accuracy_change']:+.2f} pts on the {checked['on']}"
        print(f"schedule for --max-drop {config.max_drop} written to {out}: predicted "
              f"{predicted['accuracy_change_pts']:+.2f} pts, {predicted['saved_ms']:.3f} ms "
              f"saved of {predicted['baseline_ms']:.3f} ({config.objective}){whole}",
              file=sys.stderr)
        print(saving_line(result.schedule), file=sys.stderr)
        print(f"verify it with `{verify_command(spec, result.schedule, out)}`",
              file=sys.stderr)
    failed = [r for r in result.rows if r.get("error")]
    return EXIT_VARIANT_FAILED if failed else EXIT_OK


def cmd_sensitivity_lm(args, config, spec) -> int:
    """A language model's map (``benchmarks.sensitivity.lm_map``): stored as a run of kind
    ``sensitivity`` whose spec says ``family: lm``, its rows on stdout and in --json."""
    from benchmarks.run.lm_runner import LMSweep, check_lm_spec
    from benchmarks.spec.lm import LMOptions
    config.check_family("lm")
    for flag, given in (("--weights", args.weights), ("--checkpoint", args.checkpoint),
                        ("--out", args.out)):
        if given:
            raise ValueError(f"a language model's map takes no {flag}")
    # A map scores and never times a generation: its prompt only has to fit the window.
    args.prompt_tokens = min(args.prompt_tokens, args.window)
    options = config_from_args(LMOptions, args)
    check_lm_spec(spec)
    check_writable(args.json_file, "--json")
    sweep = LMSweep(spec, options)  # the model and text: refused in one line

    from benchmarks.sensitivity.lm_map import build_lm_map
    say = (lambda _line: None) if args.quiet else \
        (lambda line: print(f"[lm map] {line}", file=sys.stderr, flush=True))
    if args.no_store:
        result = build_lm_map(sweep, config, on_progress=say)
    else:
        from benchmarks.store.database import ResultsStore
        store = ResultsStore(args.store)
        stored = {"sweep": spec.to_dict(), "sensitivity": config.to_dict(),
                  "lm": options.to_dict(), "family": "lm", "source_run": None}
        with store.record(model=spec.model, dataset=spec.dataset, device="cpu", spec=stored,
                          environment=sweep.environment, kind="sensitivity") as recorder:
            result = build_lm_map(sweep, config, on_progress=say,
                                  on_row=lambda index, row: recorder.add(row, index))
            recorder.set_environment({**sweep.environment, "sensitivity": result.summary()})
        print(f"map {recorder.run_id} stored in {store.path}", file=sys.stderr)
    print(result.table())
    if args.json_file:
        Path(args.json_file).write_text(json.dumps(result.document(sweep.environment),
                                                   indent=2, default=str))
    return EXIT_VARIANT_FAILED if any(r.get("error") for r in result.rows) else EXIT_OK


def saving_line(schedule: dict) -> str:
    """The schedule's predicted latency saving beside the one measured on its model."""
    predicted, measured = schedule["predicted"], schedule.get("measured") or {}
    tuned = schedule.get("finetune_epochs")
    tuned = "" if tuned is None else f", both with {tuned} epochs of fine-tuning"
    head = f"latency saved ({schedule['objective']}): predicted {predicted['saving']:.1%}"
    if measured.get("error"):
        return f"{head}; not measured: {measured['error']}"
    if measured.get("saving") is None:
        return f"{head}; not measured (--verify-rounds 0, or nothing pruned)"
    ci = measured.get("saving_ci")
    interval = "" if ci is None else f" [95% interval {ci[0]:.1%}, {ci[1]:.1%}]"
    return (f"{head}, measured {measured['saving']:.1%}{interval} ({measured['schedule_ms']:.3f}"
            f" vs {measured['baseline_ms']:.3f} ms over {measured['rounds']} interleaved "
            f"rounds{tuned})")


def verify_command(spec, schedule: dict, out: str) -> str:
    """The ``run`` that verifies the schedule: the map's model and data, and the fine-tuning
    the prediction assumed (said explicitly, though the schedule's variant applies it)."""
    from benchmarks.sensitivity.schedule import schedule_finetune_epochs
    parts = ["run", "--model", spec.model, "--dataset", spec.dataset, "--schedule", out]
    epochs = schedule_finetune_epochs(schedule)
    if epochs is not None:
        parts += ["--finetune-epochs", str(epochs)]
    return " ".join(parts)


def map_spec(spec, config, args) -> dict:
    """What a stored map says it was asked: the baseline's sweep and the map's config."""
    return {"sweep": spec.to_dict(), "sensitivity": config.to_dict(),
            "source_run": getattr(args, "from_run", None)}


def _progress(phase: str, done: int, total: int, message: str) -> None:
    print(f"\r{message[:76]:<76}", end="", file=sys.stderr, flush=True)
