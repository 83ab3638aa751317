"""The command line: ``compression-bench`` (= ``python -m benchmarks``) run | list | history |
report | export | distributed.

A table goes to stdout, progress to stderr. Exit status: 0 every variant succeeded, 1 some
variant failed (its error says why; the others are reported and stored), 2 the input was
invalid and nothing ran (one line on stderr, no traceback).

The techniques' flags are generated from the technique registry: each setting's flag, help,
accepted values and whether it takes a list (``a,b,c``) or a range (``start:stop:count``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from optimizers.errors import described, first_line

EXIT_OK, EXIT_VARIANT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
ENABLED = object()  # a switch given without a value (--amp): on, with the default


class UsageError(ValueError):
    pass


class OneLineParser(argparse.ArgumentParser):
    """argparse prints usage and a message; a user gets one line naming the problem."""

    def error(self, message):
        raise UsageError(f"{self.prog}: {message}")


def _positive_int(name):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a positive integer, got {text!r}")
        if value < 1:
            raise argparse.ArgumentTypeError(f"{name} must be a positive integer, got {text!r}")
        return value
    return parse


def _float(name):
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}")
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{name} must be a finite number, got {text!r}")
        return value
    return parse


def _shape(text):
    try:
        dims = tuple(int(p) for p in text.split(","))
    except ValueError:
        dims = ()
    if len(dims) != 3 or any(d < 1 for d in dims):
        raise argparse.ArgumentTypeError(
            f"--input-shape must be C,H,W with three positive integers, got {text!r}")
    return dims


# -- axes: a value, a list a,b,c, or a range start:stop:count ----------------------------------

def axis_parser(flag: str, meta):
    """The argparse type of a setting: one value, or for a sweepable setting a list
    (``0.2,0.4``) or a range (``0.1:0.9:5``, count values evenly from start to stop)."""
    def one(text: str):
        text = text.strip()
        if meta.kind == "choice":
            if text not in meta.choices:
                raise argparse.ArgumentTypeError(
                    f"invalid choice: {text!r} (choose from {', '.join(meta.choices)})")
            return text
        if meta.kind == "text":
            if not text:
                raise argparse.ArgumentTypeError(f"{flag} needs a name")
            return text
        try:
            value = int(text) if meta.integer else float(text)
        except ValueError:
            kind = "an integer" if meta.integer else "a number"
            raise argparse.ArgumentTypeError(f"{flag} must be {kind}, got {text!r}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{flag} must be a finite number, got {text!r}")
        return value

    def parse(text: str):
        if meta.sweep and meta.kind in ("int", "float") and text.count(":") == 2:
            return expand_range(flag, text, meta.integer)
        parts = text.split(",") if meta.sweep else [text]
        return tuple(one(p) for p in parts)
    return parse


def expand_range(flag: str, text: str, integer: bool = False) -> tuple:
    """``start:stop:count`` -> count values evenly spaced from start to stop, inclusive."""
    from benchmarks.spec.plan import expand_range as spaced
    start_text, stop_text, count_text = text.split(":")
    try:
        start, stop, count = float(start_text), float(stop_text), int(count_text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{flag} range must be start:stop:count with numbers and a whole count, "
            f"got {text!r}") from None
    if not (math.isfinite(start) and math.isfinite(stop)):
        raise argparse.ArgumentTypeError(f"{flag} range needs finite numbers, got {text!r}")
    if count < 1:
        raise argparse.ArgumentTypeError(f"{flag} range count must be at least 1, got {count}")
    if count > 10_000:
        raise argparse.ArgumentTypeError(f"{flag} range count {count} is far above any cap; "
                                         f"give at most a few dozen values")
    return spaced(start, stop, count, integer)


# -- the parser ------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    from benchmarks.spec.datasets import list_datasets
    from benchmarks.spec.plan import DEFAULT_MAX_VARIANTS
    from benchmarks.spec.sweep import (
        DEVICES,
        EXECUTORS,
        FP32_MODES,
        LABELS,
        MAX_SEEDS,
        TIMING_MODES,
    )
    from optimizers import registry

    parser = OneLineParser(prog="python -m benchmarks",
                           description="Benchmark model compression variants side by side.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    run = sub.add_parser("run", help="build and measure the variants of one sweep")
    run.add_argument("--model", default="seed_cnn",
                     help="a zoo name (see `list`), torchvision:NAME, timm:NAME or "
                          "FILE.py:FACTORY")
    run.add_argument("--weights", metavar="NAME",
                     help="pretrained weights of a torchvision:/timm: model, from the local "
                          "caches (torch hub's checkpoints folder, the Hugging Face cache): a "
                          "torchvision weights name (DEFAULT, IMAGENET1K_V1, ...) or "
                          "'pretrained' for timm; inputs then follow the weights' own "
                          "resize, crop and normalisation")
    run.add_argument("--labels", choices=LABELS,
                     help="imagenet: the image folder's class folders are ImageNet-1k ids "
                          "(n01440764 ...) scored by the model's own 1000-class head; "
                          "unset: the folders are the classes and the head is replaced")
    run.add_argument("--checkpoint", help=".safetensors, or a .pt/.pth state_dict")
    run.add_argument("--dataset", default="digits", help=" | ".join(list_datasets()) + " (see `list`)")
    run.add_argument("--input-shape", type=_shape, help="C,H,W (needed for synthetic)")
    run.add_argument("--normalize", metavar="MODE",
                     help="how inputs are scaled: dataset (the training split's statistics, "
                          "the default) | none ([0, 1] pixels) | imagenet | MEAN,STD (per "
                          "channel joined by ':'). Say it with --checkpoint: the default is a "
                          "guess there")
    run.add_argument("--data-root", help="where cifar10 lives")
    run.add_argument("--download", action="store_true",
                     help="allow downloads: cifar10 into --data-root, --weights into the "
                          "torch hub or Hugging Face cache (never otherwise)")
    for technique in registry.techniques():
        group = run.add_argument_group(technique.name, technique.description)
        if technique.switch is None:
            group.add_argument(f"--{technique.name}", dest=f"{technique.name}.",
                               action="store_true", help=f"turn {technique.name} on")
        for field, meta, default in technique.fields():
            flag = technique.flag(field)
            kwargs = dict(dest=f"{technique.name}.{field}", default=None,
                          type=axis_parser(flag, meta), metavar=_metavar(meta))
            shown = "unset" if default is None else default
            kwargs["help"] = (f"{meta.help} ({meta.accepted()}; default {shown}"
                              f"{'; a list a,b or a range start:stop:count sweeps it' if meta.sweep else ''})")
            if field == technique.switch:
                kwargs["help"] = f"turn {technique.name} on: " + kwargs["help"]
                if meta.nullable:
                    kwargs.update(nargs="?", const=ENABLED)
            group.add_argument(flag, **kwargs)
    run.add_argument("--combine", action="store_true",
                     help="add chained variants: every enabled technique, one per point of "
                          "their values' cross product")
    run.add_argument("--max-variants", type=_positive_int("--max-variants"),
                     default=DEFAULT_MAX_VARIANTS,
                     help=f"refuse sweeps with more variants (default {DEFAULT_MAX_VARIANTS})")
    run.add_argument("--device", default="auto", choices=DEVICES)
    run.add_argument("--fp32", default="ieee", choices=FP32_MODES,
                     help="on a GPU: IEEE fp32, or TF32 for matmuls and convolutions")
    run.add_argument("--batch-size", type=int, default=32)
    run.add_argument("--epochs", type=int, default=8,
                     help="the baseline's (and students') training budget; 0: the baseline "
                          "is the model as loaded (--weights or --checkpoint), untrained")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--seeds", type=int, default=1,
                     help=f"rebuild every trained variant with this many seeds (1-{MAX_SEEDS}): "
                          f"accuracy as mean ± std, distillation's gain with its interval")
    run.add_argument("--threads", type=_positive_int("--threads"))
    run.add_argument("--min-time", type=_float("--min-time"), default=1.0,
                     help="seconds of latency samples per variant (at least 10 runs)")
    run.add_argument("--timing", default="interleaved", choices=TIMING_MODES,
                     help="interleaved: build every variant, then time them together in "
                          "round-robin rounds (host drift hits all alike); sequential: each "
                          "right after its build")
    run.add_argument("--timing-rounds", type=_positive_int("--timing-rounds"), default=5)
    run.add_argument("--executor", default="local", choices=EXECUTORS,
                     help="local: every build here, in turn; ray: builds as tasks on a Ray "
                          "cluster, timed together on one of its nodes")
    run.add_argument("--ray-address", metavar="HOST:PORT",
                     help="the Ray cluster's head (default: $RAY_ADDRESS)")
    run.add_argument("--json", dest="json_file", metavar="FILE")
    run.add_argument("--csv", dest="csv_file", metavar="FILE")
    run.add_argument("--store", metavar="FILE", help="the SQLite results store")
    run.add_argument("--no-cache", action="store_true", help="train without the weights cache")
    run.add_argument("--quiet", action="store_true", help="no progress on stderr")

    sub.add_parser("list", help="models, datasets, techniques and their settings").add_argument(
        "--json", action="store_true")
    hist = sub.add_parser("history", help="past runs and their variants")
    hist.add_argument("--json", action="store_true")
    hist.add_argument("--store", metavar="FILE")
    hist.add_argument("--limit", type=_positive_int("--limit"))
    report = sub.add_parser("report", help="a run as one self-contained HTML file: every "
                                           "chart, the table, the environment (opens offline)")
    report.add_argument("run_id", metavar="RUN_ID")
    report.add_argument("--compare", metavar="RUN_ID",
                        help="a second sweep: its shared variants side by side, paired tests")
    report.add_argument("--html", required=True, metavar="FILE", help="where to write it")
    report.add_argument("--store", metavar="FILE")
    export = sub.add_parser("export", help="a variant's model as files: safetensors with its "
                                           "architecture, a torch.export .pt2, ONNX (float "
                                           "variants) and a model card")
    export.add_argument("run_id", metavar="RUN_ID")
    export.add_argument("variant", metavar="VARIANT", help="its name, as `history` shows it")
    export.add_argument("--out", required=True, metavar="DIR", help="the folder to write")
    export.add_argument("--store", metavar="FILE")
    sub.add_parser("distributed", help="data-parallel training benchmark", add_help=False)
    return parser


def _metavar(meta) -> str:
    if meta.kind == "choice":
        return "|".join(meta.choices)
    return "NAME" if meta.kind == "text" else ("N" if meta.integer else "X")


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
    from benchmarks.spec.sweep import SweepSpec
    choices, enabled = technique_choices(args)
    return SweepSpec.from_choices(
        choices, enabled, combine=args.combine, max_variants=args.max_variants,
        model=args.model, dataset=args.dataset, checkpoint=args.checkpoint,
        input_shape=args.input_shape, device=args.device, batch_size=args.batch_size,
        epochs=args.epochs, seed=args.seed, data_root=args.data_root, download=args.download,
        threads=args.threads, min_time_s=args.min_time, normalize=args.normalize,
        seeds=args.seeds, timing=args.timing, timing_rounds=args.timing_rounds, fp32=args.fp32,
        weights=args.weights, labels=args.labels)


def _check_writable(path: str | None, flag: str) -> None:
    if path is None:
        return
    parent = Path(path).expanduser().resolve().parent
    if not parent.is_dir():
        raise ValueError(f"{flag} {path}: folder {parent} does not exist")
    if Path(path).is_dir():
        raise ValueError(f"{flag} {path} is a directory; give a file name")


# -- commands ------------------------------------------------------------------------------

def cmd_run(args) -> int:
    from benchmarks.zoo.models import preflight
    spec = spec_from_args(args)
    preflight(spec.model, spec.weights, spec.download)  # before torch loads: refused at once

    from benchmarks.report.document import RunReport
    from benchmarks.run.cache import WeightsCache
    from benchmarks.run.estimate import estimate_sweep
    from benchmarks.run.runner import prepare_sweep
    from benchmarks.store.database import ResultsStore

    _check_writable(args.json_file, "--json")
    _check_writable(args.csv_file, "--csv")
    # Validate everything before the store is touched: bad input writes nothing.
    cache = WeightsCache(enabled=not args.no_cache)
    sweep = prepare_sweep(spec, cache=cache)
    if args.executor == "ray":
        from benchmarks.executors.ray_executor import RaySweep
        sweep = RaySweep(sweep, args.ray_address)
    store = ResultsStore(args.store)
    sweep.attach_peaks(store)
    if not args.quiet:
        print(estimate_sweep(spec, store, sweep.baseline_cached()).describe(), file=sys.stderr)
    for warning in sweep.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    progress = _Progress(len(spec.variants)) if not args.quiet else None
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
    report = RunReport(environment=sweep.environment, spec=spec.to_dict(), variants=results,
                       baseline="baseline", run_id=recorder.run_id, model=spec.model,
                       dataset=spec.dataset, device=str(sweep.device))
    print(report.table())
    print(f"run {recorder.run_id} stored in {store.path}", file=sys.stderr)
    if args.json_file:
        Path(args.json_file).write_text(json.dumps(report.document(), indent=2))
    if args.csv_file:
        Path(args.csv_file).write_text(report.csv_text())
    return EXIT_OK if all(r.ok for r in results) else EXIT_VARIANT_FAILED


class _Progress:
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


def list_info() -> dict:
    """Models, data sets and techniques with every setting's metadata (``list --json``)."""
    from benchmarks.spec.datasets import dataset_entries
    from benchmarks.zoo.models import list_models, model_entry
    from optimizers import registry
    techniques = {}
    for t in registry.techniques():
        techniques[t.name] = {
            "description": t.description, "order": t.order, "switch": t.switch_flag,
            "control": None if t.control is None else {
                "name": t.control.name, "uses": list(t.control.uses),
                "description": t.control.description},
            "settings": {f: {"flag": t.flag(f), "help": m.help, "accepted": m.accepted(),
                             "default": d, "sweep": m.sweep,
                             **({"choices": list(m.choices)} if m.choices else {}),
                             **({"low": m.low, "high": m.high} if m.kind in ("int", "float")
                                else {})}
                         for f, m, d in t.fields()}}
    from benchmarks.zoo.catalogue import SOURCES, names
    return {
        "models": {n: {"family": model_entry(n).family, "description": model_entry(n).description,
                       "student": model_entry(n).student} for n in list_models()},
        "catalogues": {source: names(source) for source in SOURCES},
        "datasets": [entry.menu for entry in dataset_entries()],
        "dataset_entries": {entry.menu: entry.to_dict() for entry in dataset_entries()},
        "techniques": techniques,
        "order": list(registry.names()),
    }


def cmd_list(args) -> int:
    info = list_info()
    if args.json:
        print(json.dumps(info, indent=2))
        return EXIT_OK
    print("models:")
    for name, m in info["models"].items():
        student = f" (student: {m['student']})" if m["student"] else ""
        print(f"  {name:<26} {m['description']}{student}")
    for source, listed in info["catalogues"].items():
        print(f"  {source + ':NAME':<26} {len(listed)} models of {source}'s registry, e.g. "
              f"{', '.join(listed[:3])} (list --json names them all)")
    print("  FILE.py:FACTORY            your own: FACTORY(num_classes, in_channels) -> nn.Module")
    print("datasets:")
    for name, d in info["dataset_entries"].items():
        print(f"  {name:<26} {d['description']}")
    print(f"techniques (combined in the order {' -> '.join(info['order'])}):")
    for name, t in info["techniques"].items():
        print(f"  {name:<8} {t['switch']:<10} {t['description']}")
        for field, s in t["settings"].items():
            sweep = ", sweepable" if s["sweep"] else ""
            print(f"           {s['flag']:<22} {s['accepted']} (default {s['default']}{sweep})")
        if t["control"]:
            print(f"           control: {t['control']['name']}: {t['control']['description']}")
    return EXIT_OK


def cmd_history(args) -> int:
    from benchmarks.report.document import RunReport
    from benchmarks.store.database import ResultsStore
    store = ResultsStore(args.store)
    runs = store.runs(limit=args.limit)
    if args.json:
        print(json.dumps([RunReport.from_stored(r).summary() for r in runs], indent=2,
                         default=str))
        return EXIT_OK
    if not runs:
        print(f"no runs in {store.path}")
        return EXIT_OK
    for run in runs:
        ok = sum(1 for v in run["variants"] if not v.get("error"))
        print(f"{run['run_id']}  {run['created_at'][:19]}  {run['kind']:<11} {run['model']:<20} "
              f"{run['dataset']:<12} {run['device'] or '-':<7} {run['status']:<11} "
              f"{ok}/{len(run['variants'])} variants ok")
    return EXIT_OK


def _stored_run(store, run_id: str, flag: str = "RUN_ID") -> dict:
    run = store.run(run_id)
    if run is None:
        raise ValueError(f"{flag} {run_id!r} is not in the store {store.path}; `history` "
                         f"lists the runs")
    return run


def cmd_report(args) -> int:
    from benchmarks.report.document import RunReport
    from benchmarks.report.html import render
    from benchmarks.store.database import ResultsStore
    _check_writable(args.html, "--html")
    store = ResultsStore(args.store)
    report = RunReport.from_stored(_stored_run(store, args.run_id))
    compare = None if args.compare is None else RunReport.from_stored(
        _stored_run(store, args.compare, "--compare"))
    html = render(report, compare)
    Path(args.html).write_text(html, encoding="utf-8")
    print(f"report of run {args.run_id} written to {args.html} "
          f"({len(html.encode()) / 2**20:.2f} MB)", file=sys.stderr)
    return EXIT_OK


def cmd_export(args) -> int:
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


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from benchmarks.measure.environment import quiet_library_noise
    quiet_library_noise()
    if argv and argv[0] == "distributed":
        from benchmarks.distributed.launcher import main as distributed_main
        return distributed_main(argv[1:])
    try:
        args = build_parser().parse_args(argv)
        command = {"run": cmd_run, "list": cmd_list, "history": cmd_history,
                   "report": cmd_report, "export": cmd_export}[args.command]
        return command(args)
    except ValueError as exc:  # bad input: one line, nothing ran
        print(f"error: {first_line(exc, 1000)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (RuntimeError, MemoryError) as exc:
        # The environment's fault (STYLE: RuntimeError), e.g. an allocator refusing memory
        # while data loads: still one line, never a traceback.
        print(f"error: {described(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def entry_point() -> None:
    """The ``compression-bench`` console script."""
    sys.exit(main())
