"""The winner's recipe: its spec (the sweep of the baseline and the winner, what the page's
*Run this* submits) and one command that builds it again. Flags come from the registry, as
``run``'s parser makes them. Torch-free."""

from __future__ import annotations

import dataclasses
import shlex

from benchmarks.spec.sweep import SweepSpec
from benchmarks.spec.variant import BASELINE, VariantSpec
from optimizers import registry

# The sweep's fields a command repeats when they differ from run's defaults, with their flags.
SWEEP_FLAGS = (("model", "--model"), ("weights", "--weights"), ("dataset", "--dataset"),
               ("labels", "--labels"), ("checkpoint", "--checkpoint"),
               ("input_shape", "--input-shape"), ("normalize", "--normalize"),
               ("data_root", "--data-root"), ("device", "--device"), ("fp32", "--fp32"),
               ("batch_size", "--batch-size"), ("epochs", "--epochs"), ("seed", "--seed"),
               ("threads", "--threads"), ("min_time_s", "--min-time"))


def _text(value) -> str:
    if isinstance(value, (tuple, list)):
        return ",".join(map(str, value))
    return f"{value:g}" if isinstance(value, float) else str(value)


def technique_flags(variant: VariantSpec) -> list[str]:
    """The flags that switch on each technique of the variant with its settings."""
    args = []
    for name, settings in variant.steps:
        technique = registry.get(name)
        if technique.switch is None:
            args.append(f"--{name}")
        for field, meta, default in technique.fields():
            value = getattr(settings, field)
            if field == technique.switch:
                args += [technique.flag(field)] + ([] if value is None else [_text(value)])
            elif value != default and value is not None:
                args += [technique.flag(field), _text(value)]
    if len(variant.techniques) > 1:
        args.append("--combine")  # the chained variant (and each technique alone beside it)
    return args


def command(spec: SweepSpec, variant: VariantSpec, runtime: str = "eager") -> str:
    defaults = SweepSpec()
    args = ["compression-bench", "run"]
    for name, flag in SWEEP_FLAGS:
        value = getattr(spec, name)
        if value != getattr(defaults, name) and value is not None:
            args += [flag, _text(value)]
    if runtime != "eager":  # the winner is that runtime's cell of the recipe
        args += ["--runtime", f"eager,{runtime}"]
    return shlex.join(args + technique_flags(variant))


def recipe(spec: SweepSpec, variant: VariantSpec, runtime: str = "eager") -> dict:
    """{"variant", "runtime", "spec" (the baseline and the winner, under its runtime, as a
    sweep job takes it), "command"}."""
    # The baseline itself can win (under a faster runtime): its sweep is the baseline alone.
    variants = (BASELINE,) if variant.name == BASELINE.name else (BASELINE, variant)
    own = dataclasses.replace(spec, variants=variants,
                              runtimes=tuple(dict.fromkeys(("eager", runtime))))
    return {"variant": variant.to_dict(), "runtime": runtime, "spec": own.to_dict(),
            "command": command(spec, variant, runtime)}
