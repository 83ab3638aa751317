"""``run``: one sweep built and measured, its table on stdout, progress on stderr, the run in
the store (and as JSON or CSV when asked)."""

from __future__ import annotations

import json
import sys
from dataclasses import replace

from benchmarks.cli.outputs import EXIT_OK, EXIT_VARIANT_FAILED, check_writable, write_output
from benchmarks.cli.parser import ENABLED


def technique_choices(args) -> tuple[dict, set[str]]:
    """(choices, enabled) from the parsed flags: {(technique, field): values}."""
    from optimizers import registry
    choices, enabled = {}, set()
    for technique in registry.techniques():
        if technique.switch is None and getattr(args, f"{technique.name}.", False):
            enabled.add(technique.name)
        for field, _, _ in technique.fields():
            value = getattr(args, f"{technique.name}.{field}", None)
            if value is None:
                continue
            if field == technique.switch:
                enabled.add(technique.name)
                if value is ENABLED:
                    continue
            choices[(technique.name, field)] = value
    return choices, enabled


def spec_from_args(args):
    from benchmarks.cli.parser import config_from_args
    from benchmarks.spec.runtimes import DeploymentConfig
    from benchmarks.spec.sweep import SweepSpec
    choices, enabled = technique_choices(args)
    deployment = config_from_args(DeploymentConfig, args)
    schedule = _schedule(args, choices)
    if schedule is not None and not enabled:
        # The schedule's variant beside the baseline alone: no other technique is planned.
        spec = SweepSpec(**_sweep_fields(args, deployment))
        return replace(spec, variants=spec.variants + (schedule,))
    spec = SweepSpec.from_choices(
        choices, enabled, combine=args.combine, max_variants=args.max_variants,
        **_sweep_fields(args, deployment))
    if schedule is not None:
        spec = replace(spec, variants=spec.variants + (schedule,))
    return spec


def _sweep_fields(args, deployment) -> dict:
    """The SweepSpec fields the flags set, besides the techniques'."""
    return dict(model=args.model, dataset=args.dataset, checkpoint=args.checkpoint,
                input_shape=args.input_shape, device=args.device, batch_size=args.batch_size,
                epochs=args.epochs, seed=args.seed, data_root=args.data_root,
                download=args.download, min_time_s=args.min_time, normalize=args.normalize,
                seeds=args.seeds, timing=args.timing, timing_rounds=args.timing_rounds,
                fp32=args.fp32, weights=args.weights, labels=args.labels, resize=args.resize,
                **deployment.sweep_fields())


def _schedule(args, choices: dict):
    """``--schedule FILE``'s variant, refused before anything loads when the file is not a
    schedule or names another model (its groups are checked once the model is built)."""
    if not getattr(args, "schedule", None):
        return None
    from benchmarks.sensitivity.schedule import read_schedule, schedule_variant
    doc = read_schedule(args.schedule)
    if doc.get("model") not in (None, args.model):
        raise ValueError(f"--schedule {args.schedule} was written for model {doc['model']}; "
                         f"this run's model is {args.model}")
    tune = choices.get(("prune", "finetune_epochs"))
    if tune is not None and len(tune) > 1:
        raise ValueError("--schedule's variant takes one --finetune-epochs value")
    return schedule_variant(doc, tune[0] if tune else None)


def cmd_run(args) -> int:
    if args.executor == "ray":  # an optional part, and a cluster: refused before any loading
        from benchmarks.executors.ray_executor import address_or_default, require_ray
        require_ray()
        address_or_default(args.ray_address)
    from benchmarks.cli.lm_run import cmd_run_lm, wants_lm
    from benchmarks.spec import runtimes
    from benchmarks.zoo.models import preflight
    spec = spec_from_args(args)
    if wants_lm(spec):
        return cmd_run_lm(args, spec, technique_choices(args)[0])
    preflight(spec.model, spec.weights, spec.download)  # before torch loads: refused at once
    runtimes.check_available(spec.runtimes)
    if spec.isa:
        from benchmarks.spec.isa import check_profiles
        check_profiles(spec.isa)                # a cap this CPU cannot run
        if args.executor == "ray":
            raise ValueError("--isa times profiles in processes on this machine: not with "
                             "--executor ray")
    if args.executor != "ray":  # a Ray node times the sweep on its own cores
        runtimes.check_threads([spec.threads, *spec.thread_counts])

    from benchmarks.report.document import RunReport
    from benchmarks.run.cache import WeightsCache
    from benchmarks.run.runner import prepare_sweep
    from benchmarks.run.speed import estimate_here
    from benchmarks.store.database import ResultsStore

    check_writable(args.json_file, "--json")
    check_writable(args.csv_file, "--csv")
    # Validate everything before the store is touched: bad input writes nothing.
    sweep = prepare_sweep(spec, cache=WeightsCache(enabled=not args.no_cache))
    if args.schedule:
        from benchmarks.sensitivity.groups import check_sweep_schedule
        check_sweep_schedule(sweep, spec.variants[-1])
    if args.executor == "ray":
        from benchmarks.executors.ray_executor import RaySweep
        sweep = RaySweep(sweep, args.ray_address)
    store = ResultsStore(args.store)
    sweep.attach_peaks(store)
    estimate = estimate_here(spec, store, sweep.baseline_cached())
    sweep.environment["estimate"] = estimate.to_dict()  # beside what it took, in `history`
    if not args.quiet:
        print(estimate.describe(), file=sys.stderr)
    for warning in sweep.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    results, run_id = _measure(sweep, spec, store, quiet=args.quiet,
                               cache_enabled=not args.no_cache)
    from benchmarks.measure.cores import shared_notes
    # Known once the cores are claimed: the sweep's, and each --isa profile process's.
    for note in shared_notes([sweep.environment.get("pinning"),
                              *(r.timing.how.get("pinning") for r in results)]):
        print(f"warning: {note}", file=sys.stderr)
    report = RunReport(environment=sweep.environment, spec=spec.to_dict(), variants=results,
                       baseline="baseline", run_id=run_id, model=spec.model,
                       dataset=spec.dataset, device=str(sweep.device))
    print(report.table())
    print(f"run {run_id} stored in {store.path}", file=sys.stderr)
    if args.json_file:
        write_output(args.json_file, json.dumps(report.document(), indent=2))
    if args.csv_file:
        write_output(args.csv_file, report.csv_text())
    # A profile's n/a cell (its kernels ignore the cap) is no failure: it had nothing to run.
    return EXIT_VARIANT_FAILED if any(r.failed for r in results) else EXIT_OK


def _measure(sweep, spec, store, *, quiet: bool, cache_enabled: bool = True
             ) -> tuple[list, str]:
    """Every variant's result, recorded in the store as it comes; (results, run id)."""
    progress = None if quiet else Progress(len(spec.variants))
    results = []
    with store.record(model=spec.model, dataset=spec.dataset, device=str(sweep.device),
                      spec=spec.to_dict(), environment=sweep.environment) as recorder:
        try:
            for index, result in enumerate(sweep.run(
                    progress, on_partial=lambda i, r: recorder.add(r, i),
                    on_environment=recorder.set_environment)):
                recorder.add(result, index)
                results.append(result)
        finally:
            if progress is not None:
                progress.close()
        if any(p != "native" for p in spec.isa):
            results = _profiles(spec, results, recorder, quiet=quiet,
                                cache_enabled=cache_enabled)
    return results, recorder.run_id


def _profiles(spec, results: list, recorder, *, quiet: bool, cache_enabled: bool) -> list:
    """``--isa``: the sweep timed again under each capped profile, in a process of its own
    (``benchmarks.run.profiles``); every row labelled with its profile."""
    from benchmarks.run.profiles import mark_native, run_profile
    mark_native(results)
    for index, result in enumerate(results):
        recorder.add(result, index)
    for profile in spec.isa:
        if profile == "native":
            continue
        if not quiet:
            print(f"timing under the {profile} profile (a process of its own)",
                  file=sys.stderr, flush=True)
        for row in run_profile(spec, profile, cache_enabled=cache_enabled,
                               like=results[0] if results else None):
            recorder.add(row, len(results))
            results.append(row)
    return results


class Progress:
    """A progress bar on stderr that redraws only when its text changes (a step-by-step
    redraw floods a log file)."""

    def __init__(self, total: int):
        from tqdm import tqdm
        self.bar = tqdm(total=total, file=sys.stderr, unit="variant", dynamic_ncols=True,
                        leave=False)
        self.shown = None

    def __call__(self, event) -> None:
        text = event.describe()[:60]
        if event.phase == "training" or event.phase.startswith(("build: ", "latency round")):
            text += f" {int(event.fraction * 10) * 10}%"
        if text != self.shown:
            self.shown = text
            self.bar.set_description_str(text)
        if event.phase == "done":
            self.bar.update(1)

    def close(self) -> None:
        self.bar.close()
