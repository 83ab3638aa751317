"""The command line's parser, built from the registries: each technique's flags from its
settings (flag, help, accepted values, whether it takes a list ``a,b,c`` or a range
``start:stop:count``), the data sets' names from their registry, and the ``distributed``
command's flags from ``DistributedConfig``'s fields (``config_flags``), whose own
``__post_init__`` then checks the values.

A parse error is one line (``UsageError``, a ValueError), never argparse's usage block.
"""

from __future__ import annotations

import argparse
import math

from optimizers.settings import setting_fields

ENABLED = object()  # a switch given without a value (--amp): on, with the default


class UsageError(ValueError):
    pass


class OneLineParser(argparse.ArgumentParser):
    """argparse prints usage and a message; a user gets one line naming the problem."""

    def error(self, message):
        raise UsageError(f"{self.prog}: {message}")


def positive_int(name):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a positive integer, got {text!r}")
        if value < 1:
            raise argparse.ArgumentTypeError(f"{name} must be a positive integer, got {text!r}")
        return value
    return parse


def finite_float(name):
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}")
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{name} must be a finite number, got {text!r}")
        return value
    return parse


def shape(text):
    try:
        dims = tuple(int(p) for p in text.split(","))
    except ValueError:
        dims = ()
    if len(dims) != 3 or any(d < 1 for d in dims):
        raise argparse.ArgumentTypeError(
            f"--input-shape must be C,H,W with three positive integers, got {text!r}")
    return dims


def _number(flag: str, text: str, integer: bool):
    try:
        return int(text) if integer else float(text)
    except ValueError:
        kind = "an integer" if integer else "a number"
        raise argparse.ArgumentTypeError(f"{flag} must be {kind}, got {text!r}") from None


# -- a technique's axes: a value, a list a,b,c, or a range start:stop:count ----------------

def axis_parser(flag: str, meta):
    """The argparse type of a technique's setting: one value, or for a sweepable setting a
    list (``0.2,0.4``) or a range (``0.1:0.9:5``, count values evenly from start to stop)."""
    def one(text: str):
        text = text.strip()
        if meta.kind == "choice":
            if text not in meta.all_choices:
                raise argparse.ArgumentTypeError(
                    f"invalid choice: {text!r} (choose from {', '.join(meta.all_choices)})")
            return text
        if meta.kind == "text":
            if not text:
                raise argparse.ArgumentTypeError(f"{flag} needs a name")
            return text
        value = _number(flag, text, meta.integer)
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


def metavar(meta) -> str:
    if meta.metavar:
        return meta.metavar
    one = ("|".join(map(str, meta.all_choices)) if meta.kind == "choice"
           else "NAME" if meta.kind == "text" else "N" if meta.integer else "X")
    if meta.many:
        return f"{one}[,...]"
    return ",".join([one] * meta.length) if meta.length else one


def _shown(value) -> str:
    if value is None:
        return "unset"
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


# -- a config's fields as flags ---------------------------------------------------------------

def config_flag(field: str, meta) -> str:
    return meta.flag or f"--{field.replace('_', '-')}"


def value_parser(flag: str, meta):
    """The argparse type of a config's field: the text made a number or a tuple of them
    (``1,2,4``), nothing more. Bounds and choices are the config's own check, so the command
    line and the page refuse alike."""
    def one(text: str):
        text = text.strip()
        return _number(flag, text, meta.integer) if meta.kind in ("int", "float") else text

    def parse(text: str):
        if meta.several and not text.strip():
            return ()  # an empty list: the config's own check names what it needs
        return tuple(one(p) for p in text.split(",")) if meta.several else one(text)
    return parse


def literal(text: str) -> str:
    """A help text as argparse prints it: its ``%`` are not format directives."""
    return text.replace("%", "%%")


def config_flags(parser, config_type) -> None:
    """A flag per ``setting(...)`` field of ``config_type``, with its help, accepted values
    and default; a hidden one (a test hook) is accepted but not listed in --help."""
    for field, meta, default in setting_fields(config_type):
        flag = config_flag(field, meta)
        text = argparse.SUPPRESS if meta.hidden else \
            literal(f"{meta.help} ({meta.accepted()}; default {_shown(default)})")
        if meta.boolean:
            if not meta.hidden:
                text = literal(f"{meta.help} (default {'on' if default else 'off'})")
            parser.add_argument(flag, dest=field, default=default, help=text,
                                action="store_true" if default is False
                                else argparse.BooleanOptionalAction)
        else:
            parser.add_argument(flag, dest=field, default=default, help=text,
                                type=value_parser(flag, meta), metavar=metavar(meta))


def config_from_args(config_type, args):
    """The config from the parsed flags: its ``__post_init__`` refuses a bad value."""
    return config_type(**{field: getattr(args, field)
                          for field, _, _ in setting_fields(config_type)})


# -- the parser ------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m benchmarks",
                           description="Benchmark model compression variants side by side.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    _add_run(sub.add_parser("run", help="build and measure the variants of one sweep"))
    _add_recommend(sub.add_parser(
        "recommend", help="search for the fastest variant provably within a margin of the "
                          "baseline, and certify it on test examples the search never saw",
        description="Search the techniques' settings (Optuna) on a search split of the test "
                    "examples, then certify the candidates faster than --min-speedup on a "
                    "certify split, once: paired non-inferiority (an exact unconditional test "
                    "where discordant pairs are few, Tango's score test otherwise) and any "
                    "--also/--latency risk, in order of how likely each is to pass on the "
                    "search split, by a graphical procedure that goes on past a failure; the "
                    "speed-up with a bootstrap interval."))
    _add_listing(sub)
    _add_handoff(sub)
    _add_distributed(sub.add_parser(
        "distributed", help="data-parallel training benchmark (DDP; gloo on the CPU, NCCL on "
                            "GPUs)",
        description="Data-parallel training benchmark: one run per worker count and "
                    "gradient compression."))
    _add_sensitivity(sub.add_parser(
        "sensitivity", help="where to compress: a per-group sensitivity map with paired "
                            "intervals, and a schedule within an accuracy budget",
        description="Every group of a technique (a Torch-Pruning dependency group, a "
                    "layer's weight, a fused op's quantizers) at every level, against the "
                    "baseline on the same examples; --max-drop writes the schedule that "
                    "saves the most latency within the budget, for run --schedule FILE."))
    return parser


def _add_run(run) -> None:
    from benchmarks.spec.datasets import list_datasets
    run.add_argument("--model", default="seed_cnn",
                     help="a zoo name (see `list`), torchvision:NAME, timm:NAME or "
                          "FILE.py:FACTORY")
    run.add_argument("--weights", metavar="NAME",
                     help="pretrained weights of a torchvision:/timm: model, from the local "
                          "caches (torch hub's checkpoints folder, the Hugging Face cache): a "
                          "torchvision weights name (DEFAULT, IMAGENET1K_V1, ...) or "
                          "'pretrained' for timm; inputs then follow the weights' own "
                          "resize, crop and normalisation")
    _add_data(run, list_datasets() + ["text", "text:PATH (a language model's)"])
    _add_technique_flags(run)
    _add_budgets(run)
    from benchmarks.spec.runtimes import DeploymentConfig
    config_flags(run.add_argument_group(
        "deployment", "measurement axes, nothing is retrained: every variant is timed under "
                      "each runtime, at each batch size, on each thread count (one row each)"),
        DeploymentConfig)
    from benchmarks.spec.lm import LMOptions
    config_flags(run.add_argument_group(
        "language models", "with --model tiny-lm, smollm2-135m or hf:DIR and --dataset text "
                           "or text:PATH: how the text is cut and the generation timed"),
        LMOptions)
    run.add_argument("--schedule", metavar="FILE",
                     help="add a variant applying this schedule (from `sensitivity "
                          "--max-drop`): per-group ratios for pruning, float groups kept for "
                          "INT8, with the usual fine-tuning (--finetune-epochs)")
    run.add_argument("--json", dest="json_file", metavar="FILE")
    run.add_argument("--csv", dest="csv_file", metavar="FILE")
    run.add_argument("--store", metavar="FILE", help="the SQLite results store")
    run.add_argument("--no-cache", action="store_true", help="train without the weights cache")
    run.add_argument("--quiet", action="store_true", help="no progress on stderr")


def runtime_list(text: str) -> tuple[str, ...]:
    """``eager,openvino``: registered runtimes, each once (whether installed is checked by
    the command, in one line)."""
    from benchmarks.spec.runtimes import RUNTIME_NAMES
    names = tuple(p.strip() for p in text.split(","))
    for name in names:
        if name not in RUNTIME_NAMES:
            raise argparse.ArgumentTypeError(
                f"unknown runtime {name!r} (choose from {', '.join(RUNTIME_NAMES)})")
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"--runtime lists a runtime twice: {text}")
    return names


def _add_recommend(rec) -> None:
    from benchmarks.recommend.request import RecommendRequest, SAMPLERS
    from benchmarks.report.answer import OBJECTIVES
    from benchmarks.spec.datasets import list_datasets
    from benchmarks.spec.sweep import EXECUTORS, FP32_MODES
    # The request's fields declare their defaults and help once (RecommendRequest).
    default, about = RecommendRequest.defaults(), RecommendRequest.help

    def said(name: str) -> str:
        return f"{about(name)} (default {default[name]})"

    rec.add_argument("--within", default=default["within"], metavar="MARGIN",
                     help=literal(said("within")))
    rec.add_argument("--confidence", type=finite_float("--confidence"),
                     default=default["confidence"], help=said("confidence"))
    rec.add_argument("--objective", default=default["objective"], choices=OBJECTIVES,
                     help=said("objective"))
    rec.add_argument("--budget", metavar="TIME", help=about("budget_s"))
    rec.add_argument("--trials", type=positive_int("--trials"), default=default["trials"],
                     help=about("trials"))
    rec.add_argument("--patience", type=positive_int("--patience"),
                     default=default["patience"], help=about("patience"))
    rec.add_argument("--certify-fraction", type=finite_float("--certify-fraction"),
                     default=default["certify_fraction"], help=said("certify_fraction"))
    rec.add_argument("--split-seed", type=int, default=default["split_seed"],
                     help=about("split_seed"))
    rec.add_argument("--sampler", default=default["sampler"], choices=SAMPLERS,
                     help=said("sampler"))
    rec.add_argument("--max-candidates", type=positive_int("--max-candidates"),
                     default=default["max_candidates"], help=said("max_candidates"))
    rec.add_argument("--also", metavar="RISK[,...]", help=literal(about("also")))
    rec.add_argument("--latency", metavar="LIMIT", help=about("latency"))
    rec.add_argument("--min-speedup", type=finite_float("--min-speedup"),
                     default=default["min_speedup"], help=said("min_speedup"))
    rec.add_argument("--runtime", type=runtime_list, default=("eager",),
                     metavar="RUNTIME[,...]",
                     help="runtimes a trial may run under: each recipe under each is a point "
                          "of the search, scored and timed from that runtime's own outputs "
                          "(default eager; see `list`)")
    rec.add_argument("--fresh", action="store_true",
                     help="measure every trial again (by default a point an earlier "
                          "recommendation measured in the same context is reused)")
    rec.add_argument("--model", default="seed_cnn",
                     help="a zoo name (see `list`), torchvision:NAME, timm:NAME or "
                          "FILE.py:FACTORY")
    rec.add_argument("--weights", metavar="NAME", help="as for run")
    _add_data(rec, list_datasets() + ["text", "text:PATH (a language model's)"])
    _add_technique_flags(rec)
    from benchmarks.spec.lm import LMOptions
    config_flags(rec.add_argument_group(
        "language models", "with --model tiny-lm, smollm2-135m or hf:DIR and --dataset text "
                           "or text:PATH: the grid the technique flags name (each language-"
                           "model technique's without one) is measured whole and certified on "
                           "next-token accuracy, windows as the paired unit"), LMOptions)
    _add_baseline_budget(rec, "seconds of latency samples per variant and wave")
    rec.add_argument("--fp32", default="ieee", choices=FP32_MODES)
    rec.add_argument("--timing-rounds", type=positive_int("--timing-rounds"), default=10,
                     help="interleaved rounds of the final timing (the search's waves take 3)")
    rec.add_argument("--executor", default="local", choices=EXECUTORS,
                     help="local, or ray: trials' builds as Ray tasks, timed on one node")
    rec.add_argument("--ray-address", metavar="HOST:PORT")
    rec.add_argument("--json", dest="json_file", metavar="FILE")
    rec.add_argument("--store", metavar="FILE", help="the SQLite results store")
    rec.add_argument("--no-cache", action="store_true", help="train without the weights cache")
    rec.add_argument("--quiet", action="store_true", help="no progress on stderr")


def _add_data(run, datasets: list[str]) -> None:
    from benchmarks.spec.sweep import LABELS, RESIZE_MODES
    run.add_argument("--resize", choices=RESIZE_MODES, default="crop",
                     help="an image folder's pictures: crop (the default: the shorter side "
                          "resized to cover the input shape, the centre cropped, the aspect "
                          "ratio kept, as pretrained weights' pipelines do) | squash (resized "
                          "straight to the input shape, the aspect ratio lost)")
    run.add_argument("--labels", choices=LABELS,
                     help="imagenet: the image folder's class folders are ImageNet-1k ids "
                          "(n01440764 ...) scored by the model's own 1000-class head; "
                          "unset: the folders are the classes and the head is replaced")
    run.add_argument("--checkpoint", help=".safetensors, or a .pt/.pth state_dict")
    run.add_argument("--dataset", default="digits",
                     help=" | ".join(datasets) + " (see `list`)")
    run.add_argument("--input-shape", type=shape, help="C,H,W (needed for synthetic)")
    run.add_argument("--normalize", metavar="MODE",
                     help="how inputs are scaled: dataset (the training split's statistics, "
                          "the default) | none ([0, 1] pixels) | imagenet | MEAN,STD (per "
                          "channel joined by ':'). Say it with --checkpoint: the default is a "
                          "guess there")
    run.add_argument("--data-root", help="where cifar10 lives")
    run.add_argument("--download", action="store_true",
                     help="allow downloads: cifar10 into --data-root, --weights into the "
                          "torch hub or Hugging Face cache (never otherwise)")


def _add_technique_flags(run) -> None:
    from optimizers import registry
    for technique in registry.techniques():
        group = run.add_argument_group(technique.name, technique.description)
        if technique.switch is None:
            group.add_argument(f"--{technique.name}", dest=f"{technique.name}.",
                               action="store_true", help=f"turn {technique.name} on")
        for field, meta, default in technique.fields():
            flag = technique.flag(field)
            kwargs = dict(dest=f"{technique.name}.{field}", default=None,
                          type=axis_parser(flag, meta), metavar=metavar(meta))
            sweeps = "; a list a,b or a range start:stop:count sweeps it" if meta.sweep else ""
            kwargs["help"] = argparse.SUPPRESS if meta.hidden else \
                f"{meta.help} ({meta.accepted()}; default {_shown(default)}{sweeps})"
            if field == technique.switch:
                kwargs["help"] = f"turn {technique.name} on: " + kwargs["help"]
                if meta.nullable:
                    kwargs.update(nargs="?", const=ENABLED)
            group.add_argument(flag, **kwargs)


def _add_budgets(run) -> None:
    from benchmarks.spec.plan import DEFAULT_MAX_VARIANTS
    from benchmarks.spec.sweep import (DEFAULT_TIMING_ROUNDS, DEVICES, EXECUTORS, FP32_MODES,
                                       MAX_SEEDS, TIMING_MODES)
    run.add_argument("--combine", action="store_true",
                     help="add chained variants: every enabled technique, one per point of "
                          "their values' cross product")
    run.add_argument("--max-variants", type=positive_int("--max-variants"),
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
    run.add_argument("--min-time", type=finite_float("--min-time"), default=1.0,
                     help="seconds of latency samples per variant (at least 10 runs)")
    run.add_argument("--timing", default="interleaved", choices=TIMING_MODES,
                     help="interleaved: build every variant, then time them together in "
                          "round-robin rounds (host drift hits all alike); sequential: each "
                          "right after its build")
    run.add_argument("--timing-rounds", type=positive_int("--timing-rounds"),
                     default=DEFAULT_TIMING_ROUNDS,
                     help="interleaved rounds (each a slice of --min-time); the speed-up "
                          "intervals and the best runtime resample them")
    run.add_argument("--executor", default="local", choices=EXECUTORS,
                     help="local: every build here, in turn; ray: builds as tasks on a Ray "
                          "cluster, timed together on one of its nodes")
    run.add_argument("--ray-address", metavar="HOST:PORT",
                     help="the Ray cluster's head (default: $RAY_ADDRESS)")


def _add_listing(sub) -> None:
    sub.add_parser("list", help="models, datasets, techniques and their settings").add_argument(
        "--json", action="store_true")
    hist = sub.add_parser("history", help="past runs and their variants")
    hist.add_argument("--json", action="store_true")
    hist.add_argument("--store", metavar="FILE")
    hist.add_argument("--limit", type=positive_int("--limit"))
    jobs = sub.add_parser("jobs", help="the dashboard's job queue: each job's kind, status and "
                                       "error, newest first")
    jobs.add_argument("--json", action="store_true")
    jobs.add_argument("--store", metavar="FILE")
    jobs.add_argument("--limit", type=positive_int("--limit"), default=50)
    mcp = sub.add_parser("mcp", help="serve the engine to an agent over the Model Context "
                                     "Protocol on stdio (the owner's token in "
                                     "COMPRESSION_BENCH_MCP_TOKEN)")
    mcp.add_argument("--store", metavar="FILE")


def _add_handoff(sub) -> None:
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
    export.add_argument("--out", required=True, metavar="DIR",
                        help="the folder to write: new or empty, unless --force")
    export.add_argument("--force", action="store_true",
                        help="export into a folder that is not empty: the export's files "
                             "there are replaced, other files left as they are")
    export.add_argument("--store", metavar="FILE")


def _add_distributed(dist) -> None:
    from benchmarks.spec.distributed import DistributedConfig
    config_flags(dist, DistributedConfig)
    dist.add_argument("--json", dest="json_file", metavar="FILE",
                      help="write the runs to this JSON file")
    dist.add_argument("--store", metavar="FILE",
                      help="the SQLite results store (default: per user)")
    dist.add_argument("--no-store", action="store_true", help="do not record in the store")


def _add_baseline_budget(cmd, min_time_help: str) -> None:
    """The device and budget flags of a command that trains its own baseline (recommend,
    sensitivity): one sweep's worth, not run's sweepable lists."""
    from benchmarks.spec.sweep import DEVICES
    cmd.add_argument("--device", default="auto", choices=DEVICES)
    cmd.add_argument("--batch-size", type=int, default=32)
    cmd.add_argument("--epochs", type=int, default=8, help="the baseline's training budget")
    cmd.add_argument("--seed", type=int, default=0)
    cmd.add_argument("--threads", type=positive_int("--threads"))
    cmd.add_argument("--min-time", type=finite_float("--min-time"), default=1.0,
                     help=min_time_help)


def _add_sensitivity(cmd) -> None:
    from benchmarks.sensitivity.config import SensitivityConfig
    from benchmarks.spec.datasets import list_datasets
    cmd.add_argument("--model", default="seed_cnn",
                     help="a zoo name, torchvision:NAME, timm:NAME or FILE.py:FACTORY")
    cmd.add_argument("--weights", metavar="NAME", help="pretrained weights (as for run)")
    cmd.add_argument("--from-run", metavar="RUN_ID",
                     help="map a stored sweep's baseline (its model, data and budgets; its "
                          "weights from the cache) instead of the flags'")
    _add_data(cmd, list_datasets() + ["text", "text:PATH (a language model's)"])
    config_flags(cmd, SensitivityConfig)
    from benchmarks.spec.lm import LMOptions
    config_flags(cmd.add_argument_group(
        "language models", "with --model tiny-lm, smollm2-135m or hf:DIR and --dataset text "
                           "or text:PATH: the text's windows (the generation's flags are "
                           "unused: a map scores, it does not time)"), LMOptions)
    cmd.add_argument("--out", metavar="FILE", help="where --max-drop's schedule goes "
                                                   "(default schedule.json)")
    _add_baseline_budget(cmd, "seconds of the baseline's latency samples")
    cmd.add_argument("--json", dest="json_file", metavar="FILE")
    cmd.add_argument("--store", metavar="FILE", help="the SQLite results store")
    cmd.add_argument("--no-store", action="store_true", help="do not record in the store")
    cmd.add_argument("--no-cache", action="store_true",
                     help="measure every cell again (no weights or cell cache)")
    cmd.add_argument("--quiet", action="store_true", help="no progress on stderr")
