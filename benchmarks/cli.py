"""The command line: ``python -m benchmarks run | list | history | distributed``.

A table goes to stdout, progress to stderr. Exit status: 0 every variant succeeded, 1 some
variant failed (its error says why; the others are reported and stored), 2 the input was
invalid and nothing ran (one line on stderr, no traceback).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path

from .errors import described, first_line

EXIT_OK, EXIT_VARIANT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


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


def build_parser() -> argparse.ArgumentParser:
    from optimizers.settings import AMP_DTYPES, INT8_MODES, PRUNE_METHODS
    from .specs import DEVICES

    parser = OneLineParser(prog="python -m benchmarks",
                           description="Benchmark model compression variants side by side.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    run = sub.add_parser("run", help="build and measure the variants of one sweep")
    run.add_argument("--model", default="seed_cnn",
                     help="a zoo name (see `list`) or FILE.py:FACTORY")
    run.add_argument("--checkpoint", help=".safetensors, or a .pt/.pth state_dict")
    run.add_argument("--dataset", default="digits",
                     help="digits | cifar10 | imagefolder:DIR | synthetic")
    run.add_argument("--input-shape", type=_shape, help="C,H,W (needed for synthetic)")
    run.add_argument("--data-root", help="where cifar10 lives")
    run.add_argument("--download", action="store_true",
                     help="allow cifar10 to be downloaded into --data-root")
    run.add_argument("--prune", type=_float("--prune"), metavar="RATIO")
    run.add_argument("--prune-method", default="l1", choices=PRUNE_METHODS)
    run.add_argument("--finetune-epochs", type=int, default=2,
                     help="epochs of fine-tuning after pruning (0: none)")
    run.add_argument("--distill", action="store_true")
    run.add_argument("--temperature", type=_float("--temperature"), default=4.0)
    run.add_argument("--alpha", type=_float("--alpha"), default=0.7)
    run.add_argument("--student", help="the student model (default: the teacher's narrow twin)")
    run.add_argument("--amp", nargs="?", const=True, default=False, choices=AMP_DTYPES,
                     help="fp16 or bf16 (default: fp16 on CUDA, bf16 on the CPU)")
    run.add_argument("--int8", choices=INT8_MODES)
    run.add_argument("--calibration-batches", type=_positive_int("--calibration-batches"),
                     default=8)
    run.add_argument("--combine", action="store_true",
                     help="add one variant with every enabled technique chained")
    run.add_argument("--device", default="auto", choices=DEVICES)
    run.add_argument("--batch-size", type=int, default=32)
    run.add_argument("--epochs", type=int, default=8)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--threads", type=_positive_int("--threads"))
    run.add_argument("--min-time", type=_float("--min-time"), default=1.0,
                     help="seconds of latency samples per variant (at least 10 runs)")
    run.add_argument("--json", dest="json_file", metavar="FILE")
    run.add_argument("--csv", dest="csv_file", metavar="FILE")
    run.add_argument("--store", metavar="FILE", help="the SQLite results store")
    run.add_argument("--no-cache", action="store_true", help="train without the weights cache")
    run.add_argument("--quiet", action="store_true", help="no progress on stderr")

    sub.add_parser("list", help="models, datasets, techniques").add_argument(
        "--json", action="store_true")
    hist = sub.add_parser("history", help="past runs and their variants")
    hist.add_argument("--json", action="store_true")
    hist.add_argument("--store", metavar="FILE")
    hist.add_argument("--limit", type=_positive_int("--limit"))
    sub.add_parser("distributed", help="data-parallel training benchmark", add_help=False)
    return parser


def spec_from_args(args):
    from .specs import SweepSpec
    return SweepSpec.from_toggles(
        prune=args.prune, prune_method=args.prune_method, finetune_epochs=args.finetune_epochs,
        distill=args.distill, temperature=args.temperature, alpha=args.alpha,
        student=args.student, amp=args.amp, int8=args.int8, combine=args.combine,
        calibration_batches=args.calibration_batches,
        model=args.model, dataset=args.dataset, checkpoint=args.checkpoint,
        input_shape=args.input_shape, device=args.device, batch_size=args.batch_size,
        epochs=args.epochs, seed=args.seed, data_root=args.data_root, download=args.download,
        threads=args.threads, min_time_s=args.min_time)


# -- output --------------------------------------------------------------------------------

TABLE_COLUMNS = [
    ("variant", "variant", "{}"), ("device", "device", "{}"),
    ("accuracy", "acc %", "pct"), ("p50_ms", "p50 ms", "{:.3f}"), ("p90_ms", "p90 ms", "{:.3f}"),
    ("throughput", "samples/s", "{:.0f}"), ("peak_memory_mb", "peak MB", "{:.2f}"),
    ("size_mb", "size MB", "{:.3f}"), ("size_gzip_mb", "gzip MB", "{:.3f}"),
    ("nonzero_params", "nonzero", "{}"), ("p50_ms_vs_base", "p50 vs base", "{:.2f}x"),
    ("size_mb_vs_base", "size vs base", "{:.2f}x"),
]


def format_table(rows: list[dict]) -> str:
    def cell(row, key, fmt):
        value = row.get(key)
        if value is None:
            return "-"
        if fmt == "pct":
            return f"{value * 100:.2f}"
        return fmt.format(value)

    body = []
    for row in rows:
        cells = [cell(row, k, f) for k, _, f in TABLE_COLUMNS]
        if row.get("noisy"):
            cells[3] += "~"  # flagged: IQR above 10% of the median
        body.append(cells)
    heads = [h for _, h, _ in TABLE_COLUMNS]
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(heads)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(heads, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in body]
    for row in rows:
        if row.get("error"):
            lines.append(f"! {row['variant']}: {row['error']}")
    if any(r.get("noisy") for r in rows):
        lines.append("~ noisy: latency spread (IQR) above 10% of the median")
    return "\n".join(lines)


def report_dict(environment: dict, results) -> dict:
    return {"schema": 1, "environment": environment,
            "variants": [r.to_dict() for r in results]}


def write_csv(path: str, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0].keys()) if rows else ["variant"])
        writer.writeheader()
        writer.writerows(rows)


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
    from tqdm import tqdm

    from .cache import WeightsCache
    from .results import comparison_rows
    from .runner import prepare_sweep
    from .store import ResultsStore

    spec = spec_from_args(args)
    _check_writable(args.json_file, "--json")
    _check_writable(args.csv_file, "--csv")
    # Validate everything before the store is touched: bad input writes nothing.
    sweep = prepare_sweep(spec, cache=WeightsCache(enabled=not args.no_cache))
    store = ResultsStore(args.store)
    run_id = store.start_run(model=spec.model, dataset=spec.dataset, device=str(sweep.device),
                             spec=spec.to_dict(), environment=sweep.environment)
    bar = None if args.quiet else tqdm(total=len(spec.variants), file=sys.stderr,
                                       unit="variant", dynamic_ncols=True, leave=False)

    shown = [None]

    def on_progress(event):
        if bar is None:
            return
        # Redraw only when the text changes: a step-by-step redraw floods a log file.
        text = event.describe()[:60]
        if event.phase == "training" or event.phase.startswith("build: "):
            text += f" {int(event.fraction * 10) * 10}%"
        if text != shown[0]:
            shown[0] = text
            bar.set_description_str(text)
        if event.phase == "done":
            bar.update(1)

    results = []
    status = "failed"
    try:
        for result in sweep.run(on_progress):
            store.add_variant(run_id, result)
            results.append(result)
        status = "complete" if all(r.ok for r in results) else "failed"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        if bar is not None:
            bar.close()
        store.finish_run(run_id, status)
    rows = comparison_rows(results)
    print(format_table(rows))
    print(f"run {run_id} stored in {store.path}", file=sys.stderr)
    if args.json_file:
        Path(args.json_file).write_text(json.dumps(report_dict(sweep.environment, results),
                                                   indent=2))
    if args.csv_file:
        write_csv(args.csv_file, rows)
    return EXIT_OK if all(r.ok for r in results) else EXIT_VARIANT_FAILED


def cmd_list(args) -> int:
    from optimizers.settings import AMP_DTYPES, INT8_MODES, PRUNE_METHODS
    from .datasets import list_datasets
    from .models import list_models, model_entry
    from .specs import TECHNIQUES
    info = {
        "models": {n: {"family": model_entry(n).family, "description": model_entry(n).description,
                       "student": model_entry(n).student} for n in list_models()},
        "datasets": list_datasets(),
        "techniques": {"prune": list(PRUNE_METHODS), "distill": ["kd"], "amp": list(AMP_DTYPES),
                       "int8": list(INT8_MODES), "order": list(TECHNIQUES)},
    }
    if args.json:
        print(json.dumps(info, indent=2))
        return EXIT_OK
    print("models:")
    for name, m in info["models"].items():
        student = f" (student: {m['student']})" if m["student"] else ""
        print(f"  {name:<26} {m['description']}{student}")
    print("  FILE.py:FACTORY            your own: FACTORY(num_classes, in_channels) -> nn.Module")
    print("datasets: " + ", ".join(info["datasets"]))
    t = info["techniques"]
    print(f"techniques: prune ({'|'.join(t['prune'])}), distill, amp ({'|'.join(t['amp'])}), "
          f"int8 ({'|'.join(t['int8'])}); combined order: {' -> '.join(t['order'])}")
    return EXIT_OK


def cmd_history(args) -> int:
    from .store import ResultsStore
    store = ResultsStore(args.store)
    runs = store.runs(limit=args.limit)
    if args.json:
        print(json.dumps(runs, indent=2, default=str))
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


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from .environment import quiet_library_noise
    quiet_library_noise()
    if argv and argv[0] == "distributed":
        from .distributed import main as distributed_main
        return distributed_main(argv[1:])
    try:
        args = build_parser().parse_args(argv)
        command = {"run": cmd_run, "list": cmd_list, "history": cmd_history}[args.command]
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
