"""``make coverage``: every technique on torchvision's and timm's architectures, as a matrix.

Each model is built through the engine (``benchmarks.zoo.models.build_model``) at the smallest
of a few square resolutions it accepts, on synthetic data on the CPU; each technique is
applied through the registry's chain (``optimizers.chain.apply_chain``) with a small budget
and its result measured as a sweep measures it (logits, size, FLOPs, peak memory, latency).
A cell is ✓ when all of that ran, otherwise the one-line reason that stopped it. Every
model runs in its own process with a time limit, so a hang costs one cell, not the matrix.
Writes ``docs/generated/MODEL_COVERAGE.md`` and the raw cells to ``results/coverage.json``.

    python -m tools.coverage [--only SPEC ...] [--timeout S] [--output FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = ROOT / "docs" / "generated" / "MODEL_COVERAGE.md"
RAW_OUTPUT = ROOT / "results" / "coverage.json"

TORCHVISION = (
    "resnet18", "resnet34", "resnet50", "resnext50_32x4d", "wide_resnet50_2",
    "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large",
    "efficientnet_b0", "efficientnet_b1", "efficientnet_v2_s",
    "regnet_x_400mf", "regnet_y_400mf", "convnext_tiny", "densenet121",
    "shufflenet_v2_x0_5", "shufflenet_v2_x1_0", "squeezenet1_0", "squeezenet1_1",
    "mnasnet0_5", "mnasnet1_0", "googlenet", "inception_v3", "alexnet", "vgg11_bn",
    "vit_b_16", "vit_b_32", "swin_t", "swin_v2_t", "maxvit_t",
)
# Families torchvision does not have.
TIMM = (
    "ghostnet_100", "mobilevit_xxs", "levit_128s", "deit_tiny_patch16_224",
    "efficientformer_l1", "rexnet_100", "dla34", "cspresnet50", "dpn68",
    "res2net50_14w_8s", "repvgg_a0", "fastvit_t8", "edgenext_xx_small", "poolformer_s12",
    "xcit_nano_12_p16_224", "ese_vovnet19b_dw",
)
# torchvision's transformer families; every other architecture in the list is a CNN.
TRANSFORMER_FAMILIES = ("vision_transformer", "swin_transformer", "maxvit")
SIZES = (32, 64, 96, 128, 160, 224)
CLASSES = 10
SAMPLES, BATCH = 16, 2      # the synthetic training split and the batch every step uses
# The student when a model has no obvious smaller sibling: the zoo's one-block ResNet,
# which fits any resolution (and shows --student taking another source).
FALLBACK_STUDENT = "resnet10"
# The matrix's small budgets, by setting: the fewest epochs and batches that still run each
# technique's whole path (training, calibration, fine-tuning).
BUDGET = {"finetune_epochs": 1, "epochs": 1, "calibration_batches": 2, "qat_epochs": 1}
# Values a CPU machine does not run: fp16 autocast is CUDA's (the CPU's AMP is bf16).
CPU_SKIPS = {("amp", "dtype", "fp16")}
DEFAULT_TIMEOUT_S = 1800


def _cells() -> dict[str, tuple[str, str | None, object]]:
    """Cell name -> (technique, field, value), from the technique registry: one cell per
    choice of a technique's first label field with choices (the code path it picks: a pruning
    method, an INT8 mode, an AMP dtype), one for a technique without one. A cell reads as the
    flag that picks it: the technique's switch with its value (``int8 dynamic``), or the value
    of another setting alone (``channel``, from --prune-method channel)."""
    from optimizers import registry
    cells = {}
    for t in registry.techniques("image"):
        field = next((f for f in t.label_fields if t.field(f).choices), None)
        if field is None:
            cells[t.name] = (t.name, None, None)
            continue
        for value in t.field(field).choices:
            if (t.name, field, value) not in CPU_SKIPS:
                cells[f"{t.name} {value}" if field == t.switch else str(value)] = (
                    t.name, field, value)
    return cells


# The chain cell: the cells --combine would chain, structured pruning first (after it,
# distillation recovers the pruned model itself, so it takes no student).
CHAIN = ("channel", "distill", "int8 static", "amp bf16")
CELLS = (*_cells(), "chain")


def _settings(technique, values: dict):
    fields = {f for f, _, _ in technique.fields()}
    return technique.make({**{k: v for k, v in BUDGET.items() if k in fields}, **values})


def cell_steps(cell: str, student: str | None) -> list[tuple[str, object]]:
    """(technique, settings) of a cell, with the small budget of the matrix."""
    from optimizers import registry
    if cell == "chain":
        return [step for c in CHAIN for step in cell_steps(c, None)]
    name, field, value = _cells()[cell]
    technique = registry.get(name)
    values = {} if field is None else {field: value}
    if student is not None and any(f == "student" for f, _, _ in technique.fields()):
        values["student"] = student
    return [(name, _settings(technique, values))]


# -- one model, in its own process -----------------------------------------------------------

def smallest_size(spec: str) -> tuple[int, object]:
    """The smallest square resolution of SIZES the model builds and runs at, and the model."""
    import torch

    from benchmarks.zoo.models import build_model, check_input_fits
    last = None
    for size in SIZES:
        try:
            torch.manual_seed(0)
            model = build_model(spec, CLASSES, 3, (size, size)).eval()
            check_input_fits(model, torch.randn(2, 3, size, size), CLASSES, spec)
            return size, model
        except ValueError as exc:
            last = exc
    raise ValueError(f"no resolution of {SIZES} fits: {last}")


def measure_outcome(outcome, example) -> dict:
    """What a sweep measures of a variant, so a ✓ means the engine could report it."""
    import torch

    from benchmarks.measure.latency import measure_latency
    from benchmarks.measure.memory import measure_peak_memory
    from benchmarks.measure.size import serialized_size
    from optimizers.counting import count_flops, count_params
    device = outcome.device or torch.device("cpu")
    model = outcome.model
    model.eval()  # not chained: an exported (pt2e) graph's eval() returns None
    autocast = outcome.autocast(device.type)
    with torch.inference_mode(), autocast:
        logits = model(example.to(device))
    if tuple(logits.shape) != (len(example), CLASSES):
        raise RuntimeError(f"the variant returns {tuple(logits.shape)}, not logits")
    size, _ = serialized_size(model)
    params, _ = count_params(model)
    flops = outcome.flops_hint or count_flops(model, example[:1], device)
    peak, _ = measure_peak_memory(model, example, device,
                                          autocast=outcome.autocast(device.type))
    tracker = measure_latency(model, example, device, autocast=outcome.autocast(
        device.type), min_runs=2, min_time_s=0, warmup=1)
    return {"params": params, "size_mb": round(size / 2**20, 3),
            "flops": getattr(flops, "dense", flops), "peak_mb": round(peak / 2**20, 2),
            "p50_ms": round(sorted(tracker.samples_ms)[len(tracker.samples_ms) // 2], 3)}


def run_model(spec: str, cells: list[str]) -> None:
    """One JSON line per event on stdout: the model's facts, then each cell as it starts and
    ends (the parent names a cell that hangs by the last start it saw)."""
    import torch

    from benchmarks.measure.environment import quiet_library_noise
    from benchmarks.zoo.models import build_model, default_student, model_source
    from optimizers import chain
    from optimizers.base import Context, TrainData
    from optimizers.errors import described

    quiet_library_noise()
    torch.set_num_threads(max(1, (os.cpu_count() or 1) - 1))

    def emit(**event):
        print(json.dumps(event), flush=True)

    size, model = smallest_size(spec)
    student = default_student(spec) or FALLBACK_STUDENT
    emit(kind="model", size=size, student=student, family=model_source(spec).family(spec),
         params=sum(p.numel() for p in model.parameters()))
    g = torch.Generator().manual_seed(0)
    x = torch.randn(SAMPLES, 3, size, size, generator=g)
    y = torch.randint(0, CLASSES, (SAMPLES,), generator=g)
    ctx = Context.of(train=TrainData(x, y, BATCH, 0), example_input=x[:BATCH],
                  num_classes=CLASSES, in_channels=3, epochs=1, teacher=model,
                  build_model=lambda name: build_model(name, CLASSES, 3, (size, size)),
                  default_student=student)
    for cell in cells:
        emit(kind="start", cell=cell)
        t0 = time.perf_counter()
        try:
            outcome = chain.apply_chain(model, cell_steps(cell, student), ctx)
            detail = measure_outcome(outcome, x[:BATCH])
            detail["config"] = outcome.config
            emit(kind="cell", cell=cell, ok=True, seconds=round(time.perf_counter() - t0, 1),
                 detail=detail)
        except Exception as exc:  # the reason is the cell's content
            emit(kind="cell", cell=cell, ok=False, seconds=round(time.perf_counter() - t0, 1),
                 reason=described(exc))


def run_isolated(spec: str, cells: list[str], timeout: float) -> dict:
    """``run_model`` in a child process; a cell that hangs past ``timeout`` is recorded as
    such and the rest run in a fresh child."""
    result = {"spec": spec, "cells": {}}
    remaining = list(cells)
    while remaining:
        started = None
        proc = subprocess.Popen(
            [sys.executable, "-m", "tools.coverage", "--worker", spec, "--cells",
             ",".join(remaining)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        try:
            out, err = proc.communicate(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            timed_out = True
        for line in out.splitlines():
            event = json.loads(line)
            if event["kind"] == "model":
                result.update({k: v for k, v in event.items() if k != "kind"})
            elif event["kind"] == "start":
                started = event["cell"]
            else:
                result["cells"][event["cell"]] = event
                remaining.remove(event["cell"])
                started = None
        if not remaining:
            break
        if started is None:
            # The model itself did not build: every cell says why.
            reason = (err.strip().splitlines() or ["the worker died"])[-1][:300]
            for cell in remaining:
                result["cells"][cell] = {"ok": False, "reason": f"model: {reason}"}
            break
        why = f"no result within {timeout:.0f} s" if timed_out else \
            (err.strip().splitlines() or ["the worker died"])[-1][:300]
        result["cells"][started] = {"ok": False, "reason": why}
        remaining.remove(started)
    return result


# -- the matrix ------------------------------------------------------------------------------

def render(results: list[dict], versions: dict, wall_s: float) -> str:
    reasons: list[str] = []

    def mark(cell: dict | None) -> str:
        if cell is None:
            return "—"
        if cell["ok"]:
            return "✓"
        if cell["reason"] not in reasons:
            reasons.append(cell["reason"])
        return f"✗ [{reasons.index(cell['reason']) + 1}]"

    lines = ["# Model coverage", "",
             "Every technique on torchvision's and timm's classification architectures, "
             "measured by `make coverage` (`tools/coverage.py`): each model built through the "
             "engine at the smallest square resolution of "
             f"{', '.join(map(str, SIZES))} it accepts, {SAMPLES} synthetic images and batch "
             f"{BATCH} on the CPU; each technique applied through the chain with one epoch of "
             "fine-tuning (pruning, distillation, QAT) and its result measured as a sweep "
             "measures it (logits, size, FLOPs, peak memory, latency). ✓: all of that ran; "
             "✗ [n]: the reason below. Students: the model's default (its smaller sibling), "
             f"else the zoo's `{FALLBACK_STUDENT}`. The chain is channel pruning, "
             "distillation (recovering the pruned model from its teacher), static INT8 and "
             "bf16 AMP.", "",
             f"torch {versions['torch']}, torchvision {versions['torchvision']}, timm "
             f"{versions['timm']}, torch-pruning {versions['torch_pruning']}; "
             f"{versions['cpu']}; the whole matrix took {wall_s / 60:.0f} min.", ""]
    for source in ("torchvision", "timm"):
        rows = [r for r in results if r["spec"].startswith(source + ":")]
        if not rows:
            continue
        ok = sum(1 for r in rows for c in CELLS if (r["cells"].get(c) or {}).get("ok"))
        total = len(rows) * len(CELLS)
        lines += [f"## {source} ({len(rows)} architectures, {ok} of {total} cells succeed, "
                  f"{100 * ok / total:.1f}%)", "",
                  "| model | family | input | params | student | " + " | ".join(CELLS)
                  + " | time |",
                  "|---|---|---|---|---|" + "---|" * len(CELLS) + "---|"]
        for r in rows:
            seconds = sum((c or {}).get("seconds", 0) for c in r["cells"].values())
            params = f"{r['params'] / 1e6:.1f}M" if r.get("params") else "—"
            lines.append(f"| `{r['spec']}` | {r.get('family', '—')} | {r.get('size', '—')} | "
                         f"{params} | {r.get('student', '—')} | "
                         + " | ".join(mark(r["cells"].get(c)) for c in CELLS)
                         + f" | {seconds:.0f} s |")
        lines.append("")
        if source == "torchvision":
            cnns = [r for r in rows if r.get("family") not in TRANSFORMER_FAMILIES]
            channel = sum(1 for r in cnns if (r["cells"].get("channel") or {}).get("ok"))
            lines += [f"Channel pruning succeeds on {channel} of the {len(cnns)} CNNs "
                      f"(every architecture but ViT, Swin and MaxViT).", ""]
        def config(r: dict, cell: str, technique: str) -> dict:
            detail = (r["cells"].get(cell) or {}).get("detail") or {}
            return detail.get("config", {}).get(technique, {})

        def listed(specs: list[str]) -> str:
            return ", ".join(f"`{s}`" for s in specs)

        scoped = [r["spec"] for r in rows if config(r, "channel", "prune").get("scope") == "blocks"]
        if scoped:
            lines += [f"Channel pruning block by block (one graph over the model could not "
                      f"be built or searched): {listed(scoped)}.", ""]
        for cell, path in (("int8 static", "pt2e"), ("int8 qat", "pt2e-qat")):
            fallback = [r["spec"] for r in rows if config(r, cell, "int8").get("path") == path]
            if fallback:
                lines += [f"{cell} through torchao's pt2e flow (FX could not trace the model "
                          f"or its converted graph could not run): {listed(fallback)}.", ""]
        floats = [r["spec"] for r in rows if config(r, "int8 dynamic", "int8").get("float_layers")]
        if floats:
            lines += [f"int8 dynamic leaves float the Linear layers the forward does not call "
                      f"(their parent reads the weight: attention in {listed(floats)}).", ""]
    if reasons:
        lines += ["## Reasons", ""] + [f"{i}. {r}" for i, r in enumerate(reasons, 1)] + [""]
    return "\n".join(lines)


def versions() -> dict:
    from importlib.metadata import version

    from benchmarks.measure.environment import cpu_name
    return {"torch": version("torch"), "torchvision": version("torchvision"),
            "timm": version("timm"), "torch_pruning": version("torch-pruning"),
            "cpu": cpu_name()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.coverage")
    parser.add_argument("--only", nargs="*", help="model specs (default: the whole list)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                        help="seconds one model's process may run before its cell is a hang")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--cells", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        run_model(args.worker, args.cells.split(","))
        return 0
    specs = args.only or [f"torchvision:{n}" for n in TORCHVISION] + [f"timm:{n}" for n in TIMM]
    t0 = time.perf_counter()
    results = []
    for spec in specs:
        t1 = time.perf_counter()
        results.append(run_isolated(spec, list(CELLS), args.timeout))
        done = sum(1 for c in results[-1]["cells"].values() if c.get("ok"))
        print(f"{spec}: {done}/{len(CELLS)} in {time.perf_counter() - t1:.0f} s",
              file=sys.stderr, flush=True)
    RAW_OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    RAW_OUTPUT.write_text(json.dumps(results, indent=1))
    args.output.write_text(render(results, versions(), time.perf_counter() - t0))
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
