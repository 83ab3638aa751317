"""The model as files: a stored run's variant, rebuilt and written for use outside this tool.

``export_variant(store, run_id, variant, out_dir)`` writes into ``out_dir``:

- ``model.safetensors``: the weights (INT8 ones as integer values with their scales and zero
  points), and in its metadata the architecture needed to rebuild them: the model's source,
  the techniques' settings, and for channel-pruned models the pruned shapes.
  ``benchmarks.export.load.load_exported(out_dir)`` rebuilds the model from it.
- ``model.pt2``: a ``torch.export`` ExportedProgram (``torch.export.load``), where the
  variant exports; AMP's autocast is traced into the graph.
- ``model.onnx``: for float variants (the fp32 graph; an AMP variant's autocast is a run-time
  setting ONNX does not carry), checked under onnxruntime.
- ``model_card.json``: techniques, settings, metrics with their intervals, the environment,
  each format's status (written, or why not) and verification, and every file's SHA-256.
- for a runtime cell (``int8-static@ort``): its variant's files and the runtime's own
  artefact (ONNX Runtime's INT8 ``.onnx``, OpenVINO's ``.xml/.bin``, ``runtime.py``), the
  cell's parity figures in the card.

The pieces: ``rebuild`` (the variant as it ran, and its architecture), ``codec`` (any state
dict, INT8 included, as safetensors tensors), ``writers`` (each format, reloaded and checked),
``load`` (an export folder read back), ``files`` (names, folders, the zip).

The files are written into a folder beside ``out_dir`` and moved into place once every one
is written: a full disk (``DiskFull``, one line) or a failure leaves nothing behind; every
file is ``files.FILE_MODE`` (0600). Nothing is kept twice: trained weights are rebuilt from
the weights cache (the runner's per-step keys), never retrained. A variant whose weights
are gone, or that rebuilt here predicts differently from what the run stored, is refused in
one line, before anything is written. Every written artefact is reloaded and scored on the
run's test split: it must reproduce the stored predictions (or the accuracy within
``ACCURACY_TOLERANCE_PTS``).
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.export.files import (
    CARD_NAME,
    FILE_MODE,
    check_folder,
    publish,
    sha256,
    staging_folder,
)
from benchmarks.export.rebuild import cell_of, locate, rebuild
from benchmarks.export.runtime import write_runtime
from benchmarks.export.writers import Scores, write_onnx, write_pt2, write_weights
from benchmarks.spec.atomic import disk_full_as_one_line, write_text
from benchmarks.spec.cancel import check_stop

WRITERS = (("safetensors", write_weights), ("pt2", write_pt2), ("onnx", write_onnx))

CARD_SCHEMA = 1


def _certificate(run: dict, variant: str) -> dict:
    """A recommend run's certificate, and what it says of this variant (certified within the
    margin or not, the winner or not): what a reader of the model card must know."""
    block = run.get("recommendation")
    if not block:
        return {}
    cert = block["certificate"]
    return {"certificate": {**cert, "this_variant": {
        "certified": variant in (cert.get("certified") or []),
        "winner": variant == cert.get("winner"),
        "split": {k: v for k, v in block["split"].items() if k not in ("search", "certify")}}}}


def export_variant(store, run_id: str, variant: str, out_dir: str | Path, *, cache=None,
                   allowed_models_dir=None, allowed_data_dir=None, should_stop=None) -> dict:
    """Write ``variant`` of run ``run_id`` into ``out_dir`` (see the module's docstring);
    returns the model card. Bad input raises ValueError with one line; nothing is written
    then. A full disk raises ``DiskFull``, and leaves nothing behind. ``should_stop`` is asked
    while the run is rebuilt and between artefacts: Cancelled then, and nothing written stays."""
    run, result = locate(store, run_id, variant)
    target = check_folder(out_dir)
    cell, stored = cell_of(result), result
    if cell is not None:  # a runtime cell: its variant is what rebuilds
        names = {v["name"] for v in run.get("variants") or []}
        # A recommendation stores a runtime trial without its eager twin: the cell's own row
        # then rebuilds its recipe (``rebuild``).
        if cell["variant"] in names:
            _, result = locate(store, run_id, cell["variant"])
    rebuilt = rebuild(run, result, cache=cache, allowed_models_dir=allowed_models_dir,
                      allowed_data_dir=allowed_data_dir, should_stop=should_stop)
    check_stop(should_stop)
    # Written into a folder beside the target and moved into place once whole: a full disk
    # or a failed writer leaves neither a partial export nor a half-replaced earlier one.
    with disk_full_as_one_line(target.parent, f"the export {target.name}"):
        folder = staging_folder(target)
        try:
            card = _write(run, run_id, variant, result, rebuilt, folder, cell, should_stop,
                          stored)
            publish(folder, target)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return card


def _precision(name: str | None) -> dict | None:
    """What the variant runs in (the roof it is held to), with its registry entry's bytes per
    element; a name not registered stands alone."""
    from benchmarks.measure import precisions
    if not precisions.known(name):
        return None if name is None else {"name": name}
    return {"name": name, "bytes_per_element": precisions.get(name).bytes,
            "description": precisions.get(name).description}


def _write(run: dict, run_id: str, variant: str, result, rebuilt, folder: Path, cell=None,
           should_stop=None, stored=None) -> dict:
    """Every format and the model card, written into ``folder``."""
    from benchmarks.measure.environment import environment_card
    from benchmarks.measure.latency import pinned_threads
    from benchmarks.report.document import RunReport
    with pinned_threads(rebuilt.sweep.threads):
        scores = Scores(rebuilt)
        formats = {}
        for name, write in WRITERS:
            check_stop(should_stop)
            formats[name] = write(rebuilt, folder, scores)
        if cell is not None and cell.get("name") != "eager":
            check_stop(should_stop)
            formats["runtime"] = write_runtime(rebuilt, folder, scores, cell, stored)
    check_stop(should_stop)
    report = RunReport.from_stored(run)
    document = next(v for v in report.document()["variants"] if v["name"] == variant)
    document.pop("raw", None)
    files = {p.name: {"sha256": sha256(p), "bytes": p.stat().st_size}
             for p in sorted(folder.iterdir()) if p.name != CARD_NAME and p.is_file()}
    card = {
        "schema": CARD_SCHEMA, "run_id": run_id, "variant": variant,
        **({"runtime": cell} if cell is not None else {}),
        "model": run.get("model"), "dataset": run.get("dataset"),
        "techniques": list(result.techniques), "settings": rebuilt.config,
        "precision": _precision((document.get("roofline") or {}).get("precision")),
        "axes": dict(result.axes), "metrics": document,
        "baseline": report.baseline,
        "input": {"shape": ["batch", *rebuilt.architecture["input_shape"]], "dtype": "float32",
                  "normalization": rebuilt.architecture["normalization"],
                  "note": "pixels in [0, 1], then normalised as above; the output is logits"},
        "architecture": rebuilt.architecture, "device": str(rebuilt.device),
        "formats": formats, "files": files,
        "environment": run.get("environment") or {},
        **_certificate(run, variant),
        "exported": {"at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                     "environment": environment_card(rebuilt.sweep.device,
                                                     rebuilt.sweep.threads)},
    }
    write_text(folder / CARD_NAME, json.dumps(card, indent=2, default=str), mode=FILE_MODE)
    return card
