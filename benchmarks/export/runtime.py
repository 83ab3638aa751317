"""A runtime cell's own artefact: what the run deployed, written for use outside this tool.

Exporting a cell (``int8-static@ort``, ``baseline@openvino b32``) writes its variant's files
(``variant.py``) and, beside them, the runtime's artefact prepared again as the run prepared
it (the same float model, the same calibration batches, the same runtime config): ONNX
Runtime's INT8 ``.onnx`` (its fp32 ``.onnx`` for a float variant), OpenVINO's ``.xml/.bin``.
The artefact is loaded back by its runtime and scored on the run's test split against the
variant in eager PyTorch; the model card carries those parity figures beside the ones the run
stored. compile cells have no artefact of their own (a compiled module is not a file).
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.export.writers import Scores
from benchmarks.measure import precisions

# The runtime's files kept in the export (the rest of its working files are removed).
KEPT = {"ort": ("*.ort-int8-*.onnx", "model.runtime.onnx"),
        "openvino": ("model.openvino*.xml", "model.openvino*.bin")}


def write_runtime(rebuilt, folder: Path, scores: Scores, cell: dict,
                  stored=None) -> dict:
    """The cell's runtime artefact in ``folder``, reloaded and checked; its card entry.
    ``stored``: the cell's stored row, whose per-example bits (what a certificate of it
    counted) the reloaded artefact's predictions are checked against, example by example."""
    import torch

    from benchmarks.run.cells import deployed_precision
    from benchmarks.runtimes.base import Calibration, RuntimeConfig, prepare
    from benchmarks.runtimes.parity import parity
    from optimizers.errors import described
    name = cell["name"]
    if name not in KEPT:
        return {"file": None, "status": "not exported",
                "reason": f"{name} builds in memory (torch.compile): no file of its own; the "
                          f"variant's files are exported"}
    sweep = rebuilt.sweep
    vspec = next(v for v in sweep.spec.variants if v.name == rebuilt.name)
    precision = deployed_precision(vspec, rebuilt.config)
    calibration = None
    if precisions.get(precision).integer:  # the engine's INT8 step drew the batches
        settings = dict(vspec.settings)["int8"]
        ctx = sweep.context(lambda *_: None, variant=vspec)
        calibration = Calibration(ctx.calibration(settings.calibration_batches))
    work = folder / ".runtime"
    work.mkdir(exist_ok=True)
    try:
        config = RuntimeConfig(name, precision=precision, threads=cell.get("threads") or 1)
        ready = prepare(config, rebuilt.float_model, sweep.example.cpu(),
                        calibration=calibration, workdir=work)
        logits = scores.logits(lambda x: ready.fn(x.cpu()))
    except Exception as exc:
        _clear(work)
        return {"file": None, "status": "not exported",
                "reason": f"{name} could not prepare this variant: {described(exc)}"}
    files = _keep(name, work, folder, precision)
    labels = torch.cat([y for _, y in scores.batches]) if scores.batches[0][1] is not None \
        else None
    out = {"file": files[0] if files else None, "files": files, "status": "written",
           "runtime": {"name": name, "version": ready.version, "precision": ready.precision,
                       "details": ready.details, "ops": ready.ops},
           "parity": {"stored": cell.get("parity"),
                      "reloaded": parity(scores.reference, logits, labels)}}
    if labels is not None and stored is not None and stored.scores.correct_bits:
        out["predictions"] = same_predictions(logits, labels, stored)
    return out


def same_predictions(logits, labels, stored) -> dict:
    """The reloaded artefact's right/wrong on each test example against the stored row's
    bits: the export reproduces what the run (and a certificate of it) counted, or says on
    how many examples it does not."""
    from benchmarks.report.stats import unpack_bits
    right = (logits.argmax(1) == labels).tolist()
    before = unpack_bits(stored.scores.correct_bits, stored.scores.n_test)
    differ = sum(1 for a, b in zip(right, before) if a != b) + abs(len(right) - len(before))
    return {"examples": len(right), "differ": differ, "same": differ == 0}


def _keep(name: str, work: Path, folder: Path, precision: str) -> list[str]:
    """Move the runtime's artefact out of its working folder; drop the rest."""
    if name == "ort" and not precisions.get(precision).integer:
        (work / "model.onnx").rename(work / "model.runtime.onnx")
    kept = []
    for pattern in KEPT[name]:
        for path in sorted(work.glob(pattern)):
            if ".optimized" in path.name or ".pre." in path.name:
                continue
            path.replace(folder / path.name)
            kept.append(path.name)
    _clear(work)
    return kept


def _clear(work: Path) -> None:
    import shutil
    shutil.rmtree(work, ignore_errors=True)
