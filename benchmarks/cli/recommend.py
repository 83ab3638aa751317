"""``recommend``: the fastest variant provably within a margin of the baseline, certified on
test examples the search never saw; stored as a run like any other (``history``, ``report
--html``, ``export`` with the certificate in the model card).

Everything the user can get wrong is refused in one line, exit 2, before anything runs (the
margin, the confidence, a budget of 0, a space with no knob, a data set without labels); a
margin the certify split cannot certify is refused once the data are loaded, naming the
margin it can. Ctrl-C stops the search and certifies what it found (a second one aborts).
``--budget`` is the whole command's wall time, from the process's start: a budget too short
for one trial and its final timing is refused (exit 2) with the shortest useful one, before
the data load where the spec and the store's history already show it, else once the baseline
is measured, before any trial and before a run is stored.
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from pathlib import Path

from benchmarks.cli.outputs import EXIT_INTERRUPTED, EXIT_OK, check_writable
from benchmarks.cli.run import technique_choices


def request_from_args(args):
    from benchmarks.recommend.request import RecommendRequest, parse_budget
    return RecommendRequest(
        within=args.within, confidence=args.confidence, objective=args.objective,
        budget_s=parse_budget(args.budget), trials=args.trials,
        certify_fraction=args.certify_fraction, split_seed=args.split_seed,
        sampler=args.sampler, patience=args.patience, max_candidates=args.max_candidates,
        also=args.also, latency=args.latency, min_speedup=args.min_speedup)


def sweep_from_args(args):
    from benchmarks.spec.sweep import SweepSpec
    return SweepSpec(
        model=args.model, dataset=args.dataset, checkpoint=args.checkpoint,
        input_shape=args.input_shape, device=args.device, batch_size=args.batch_size,
        epochs=args.epochs, seed=args.seed, data_root=args.data_root, download=args.download,
        threads=args.threads, min_time_s=args.min_time, normalize=args.normalize,
        timing_rounds=args.timing_rounds, fp32=args.fp32, weights=args.weights,
        labels=args.labels)


def _check_budget_up_front(request, spec, store_path, started: float) -> None:
    """A budget the command has already spent, or that cannot hold the timing of one trial
    (or the baseline's set-up in earlier runs here): refused before any data loads."""
    if request.budget_s is None:
        return
    from benchmarks.recommend.pipeline import budget_floor_s, too_short
    from benchmarks.store.database import ResultsStore, default_store_path
    path = Path(store_path) if store_path else default_store_path()
    history = ResultsStore(path) if path.is_file() else None  # a refusal creates no store
    elapsed = time.monotonic() - started
    floor, known = budget_floor_s(spec, elapsed, history)
    if request.budget_s < floor:
        setup = ("the set-up as fast as the fastest earlier one here" if known else
                 "the data load and the baseline")
        raise too_short(request.budget_s, floor,
                        f"{elapsed:.1f} s have gone to starting, and {setup}, one trial and "
                        f"its final timing need {'about' if known else 'more than'} "
                        f"{floor - elapsed:.1f} s more", known=known)


def cmd_recommend(args) -> int:
    from benchmarks.recommend.pipeline import check_labelled
    from benchmarks.recommend.space import search_space
    from benchmarks.recommend.stopping import process_age_s
    # The budget covers the whole command: from the process's start where the process is
    # this command (its interpreter and imports too), from here where it is called in-process.
    own = sys.argv[1:2] == ["recommend"]
    started = time.monotonic() - (process_age_s() if own else 0.0)
    request = request_from_args(args)           # the margin, confidence, budget...
    from benchmarks.cli.lm_run import wants_lm
    if wants_lm(sweep_from_args(args)):          # a language model: its grid, certified
        from benchmarks.cli.lm_recommend import cmd_recommend_lm
        return cmd_recommend_lm(args, request)
    space = search_space(*technique_choices(args), runtimes=args.runtime)  # no knob: refused
    from benchmarks.spec.runtimes import check_available
    check_available(space.runtimes)             # a runtime not installed here
    spec = sweep_from_args(args)
    check_labelled(spec.dataset)                 # synthetic: no accuracy to certify
    check_writable(args.json_file, "--json")
    if args.executor == "ray":
        from benchmarks.executors.ray_executor import address_or_default, require_ray
        require_ray()
        args.ray_address = address_or_default(args.ray_address)
    from benchmarks.zoo.models import preflight
    preflight(spec.model, spec.weights, spec.download)

    from benchmarks.recommend.pipeline import Recommender
    from benchmarks.recommend.record import Recommended
    from benchmarks.views.recommendation import summary_lines, table_text
    from benchmarks.run.cache import WeightsCache
    from benchmarks.run.runner import prepare_sweep  # noqa: F401  torch: its seconds count
    from benchmarks.store.database import ResultsStore
    # After the imports, before the data load and the baseline.
    _check_budget_up_front(request, spec, args.store, started)
    count = itertools.count(1)
    say = (lambda text: None) if args.quiet else (lambda text: print(text, file=sys.stderr,
                                                                       flush=True))
    recommender = Recommender(request, spec, space,
                              cache=WeightsCache(enabled=not args.no_cache),
                              ray_address=args.ray_address if args.executor == "ray" else None,
                              on_trial=lambda record: say(_trial_line(record, next(count))),
                              memo=not args.fresh, started=started)
    store = ResultsStore(args.store)  # opened once the power check has passed
    recommender.attach(store)
    say(f"search space: {recommender.space.describe()}")
    say(f"split: {recommender.split.card()}; training or loading the baseline")
    recommender.prepare_baseline()
    with store.record(**recommender.run_fields()) as recorder:
        result = recommender.run(recorder)
    stored = store.run(result.run_id)
    record = Recommended.from_dict(result.block)
    print("\n".join(summary_lines(record, stored.get("environment"))))
    print(table_text(record))
    from benchmarks.report.document import RunReport
    report = RunReport.from_stored(stored)
    for warning in report.warnings:  # a baseline that learned nothing, say: the run's own
        print(f"warning: {warning}", file=sys.stderr)
    from benchmarks.recommend.search import NOTHING_SEARCHED
    if result.log.ended == NOTHING_SEARCHED:  # said even with --quiet: the run answers nothing
        print(f"warning: {NOTHING_SEARCHED}", file=sys.stderr)
    print(f"run {result.run_id} stored in {store.path}", file=sys.stderr)
    if args.json_file:
        Path(args.json_file).write_text(json.dumps(report.document(), indent=2, default=str))
    return EXIT_INTERRUPTED if recommender.stop.reason == "interrupted" else EXIT_OK


def _trial_line(record, count: int) -> str:
    what = {"complete": lambda: (f"search {100 * record.search_accuracy:.2f}% "
                                 f"({record.search_change_pts:+.2f} pts), "
                                 f"{record.ratio:.2f}x" + (" front" if record.front else "")
                                 + (" (reused)" if record.reused else "")),
            "pruned": lambda: "pruned early at " + ", ".join(
                f"{r['epochs']} epoch(s): {r['search_change_pts']:+.2f} pts"
                for r in record.rungs),
            }.get(record.state, lambda: f"{record.state}: {record.error or ''}")()
    return f"trial {count} {record.name}: {what}"
