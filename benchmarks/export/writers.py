"""Each format written, reloaded and scored against the variant as it ran.

An artefact passes with the same predictions on the run's test split as the stored ones, or
an accuracy within ``ACCURACY_TOLERANCE_PTS``; ONNX logits must also be within
``ONNX_TOLERANCE`` of PyTorch's. A file that fails is removed, and the card says why.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

from benchmarks.export.codec import encode_state
from benchmarks.export.files import ONNX_NAME, PT2_NAME, SOURCE_NAME, WEIGHTS_NAME
from benchmarks.export.load import load_exported, load_program, run_model
from benchmarks.export.rebuild import Rebuilt
from benchmarks.spec.atomic import raise_if_disk_full

# A reloaded artefact passes with the same predictions, or an accuracy this close (points).
ACCURACY_TOLERANCE_PTS = 0.1
# onnxruntime's logits against PyTorch's for the same fp32 weights: kernels sum in another
# order, so float rounding differs (max differences of 1e-6 to 1e-5 were seen here).
ONNX_TOLERANCE = {"rtol": 1e-3, "atol": 1e-4}
EVAL_BATCH = 256


class Scores:
    """An artefact's outputs on the run's test split (or the example batch, for data without
    labels), against the stored predictions and the rebuilt model's logits."""

    def __init__(self, rebuilt: Rebuilt):
        import torch
        self.rebuilt = rebuilt
        data = rebuilt.sweep.data
        if data.labelled:
            self.batches = list(data.batches("test", EVAL_BATCH))
        else:
            self.batches = [(rebuilt.sweep.example, None)]
        self.reference = self.logits(lambda x: run_model(rebuilt.model, x, rebuilt.device,
                                                    rebuilt.autocast))
        self.float_reference = self.reference if rebuilt.autocast is None else self.logits(
            lambda x: run_model(rebuilt.float_model, x, torch.device("cpu"), None))

    def logits(self, fn):
        import torch
        return torch.cat([fn(x).float().cpu() for x, _ in self.batches])

    def verify(self, logits, reference=None) -> dict:
        """Same predictions as the reference (by default the variant as stored), or its
        accuracy within the tolerance; and how far the logits are from the reference's."""
        import torch

        from benchmarks.report.stats import pack_bits
        expected = self.rebuilt.result.scores.accuracy
        right_expected = None
        if reference is None:
            reference = self.reference
        elif self.batches[0][1] is not None:  # another reference: its own predictions
            right_expected = self._right(reference)
            expected = sum(right_expected) / len(right_expected)
        out = {"max_abs_logit_diff": float((logits - reference).abs().max())}
        if self.batches[0][1] is None:
            out["ok"] = bool(torch.allclose(logits, reference, **ONNX_TOLERANCE))
            return out
        right = self._right(logits)
        accuracy = sum(right) / len(right)
        same = right == right_expected if right_expected is not None else \
            pack_bits(right) == self.rebuilt.result.scores.correct_bits
        out.update(accuracy=accuracy, expected_accuracy=expected,
                   stored_accuracy=self.rebuilt.result.scores.accuracy, same_predictions=same,
                   accuracy_change_pts=100 * (accuracy - expected))
        out["ok"] = same or abs(out["accuracy_change_pts"]) <= ACCURACY_TOLERANCE_PTS
        return out

    def _right(self, logits) -> list[bool]:
        import torch
        labels = torch.cat([y for _, y in self.batches])
        return (logits.argmax(1) == labels).tolist()


def _techniques(rebuilt: Rebuilt) -> list:
    """The registry entries of the techniques the variant applied (its recorded config)."""
    from optimizers import registry
    return [registry.get(name) for name in registry.names() if name in rebuilt.config]


def _not_exported(reason: str) -> dict:
    return {"file": None, "status": "not exported", "reason": reason}


def _checked(name: str, folder: Path, verification: dict, note: str | None = None) -> dict:
    """A written file's entry; one whose reload does not reproduce the variant is removed."""
    if not verification.get("ok"):
        (folder / name).unlink(missing_ok=True)
        return {**_not_exported(f"the reloaded file did not reproduce the variant "
                                f"({json.dumps(verification, default=str)}); removed"),
                "verification": verification}
    entry = {"file": name, "status": "written", "verification": verification}
    if note:
        entry["note"] = note
    return entry


def write_weights(rebuilt: Rebuilt, folder: Path, scores: Scores) -> dict:
    from safetensors.torch import save_file

    from optimizers.errors import described
    arch = rebuilt.architecture
    if arch.get("not_rebuildable"):
        return _not_exported(f"its architecture cannot be described for a rebuild: "
                             f"{arch['not_rebuildable']}")
    try:
        if arch["source"]["kind"] == "file":
            shutil.copyfile(rebuilt.sweep.spec.model.rsplit(":", 1)[0], folder / SOURCE_NAME)
        tensors, layout = encode_state(rebuilt.model.state_dict())
        save_file(tensors, str(folder / WEIGHTS_NAME),
                  metadata={"architecture": json.dumps(arch), "layout": json.dumps(layout),
                            "format": "compression-bench export, schema 1"})
        loaded = load_exported(folder, device=str(rebuilt.device))
    except Exception as exc:  # a path that cannot handle this variant: the card says why
        raise_if_disk_full(exc, folder.parent, f"the export's {WEIGHTS_NAME}")
        (folder / WEIGHTS_NAME).unlink(missing_ok=True)
        return _not_exported(f"rebuilding from the weights failed: {described(exc)}")
    return _checked(WEIGHTS_NAME, folder, scores.verify(scores.logits(loaded)),
                    note="rebuild with benchmarks.export.load.load_exported(folder)")


def _with_autocast(model, device_type: str, dtype: str):
    """``model`` in a module whose forward runs under autocast, so torch.export traces the
    casts into the graph (the program then runs as the variant did, with no context)."""
    import torch

    from optimizers.precision import AMP_TORCH_DTYPES

    class Autocast(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, x):
            with torch.autocast(device_type, dtype=AMP_TORCH_DTYPES[dtype]):
                return self.model(x)
    return Autocast()


def _batch_dim():
    import torch
    return ({0: torch.export.Dim("batch", min=1, max=65536)},)


def write_pt2(rebuilt: Rebuilt, folder: Path, scores: Scores) -> dict:
    import torch

    from optimizers.errors import described
    model = rebuilt.model
    if rebuilt.autocast is not None:
        model = _with_autocast(model, rebuilt.device.type, rebuilt.autocast)
    example = rebuilt.sweep.example.to(rebuilt.device)
    try:
        program = torch.export.export(model, (example,), dynamic_shapes=_batch_dim())
        torch.export.save(program, str(folder / PT2_NAME))
        loaded = load_program(folder)
        logits = scores.logits(lambda x: run_model(loaded, x, rebuilt.device, None))
    except Exception as exc:
        raise_if_disk_full(exc, folder.parent, f"the export's {PT2_NAME}")
        (folder / PT2_NAME).unlink(missing_ok=True)
        converted = [t.name.upper() for t in _techniques(rebuilt) if t.export == "convert"]
        what = f"{' '.join(converted)} model" if converted else "model"
        return _not_exported(f"torch.export cannot trace this {what}: {described(exc)}")
    notes = ["autocast traced into the graph"] if rebuilt.autocast else []
    notes += [t.export_notes["pt2"] for t in _techniques(rebuilt) if "pt2" in t.export_notes]
    return _checked(PT2_NAME, folder, scores.verify(logits), note="; ".join(notes) or None)


def write_onnx(rebuilt: Rebuilt, folder: Path, scores: Scores) -> dict:
    import numpy as np
    import torch

    from optimizers.errors import described
    refused = [t.not_exported["onnx"] for t in _techniques(rebuilt) if "onnx" in t.not_exported]
    if refused:
        return _not_exported(f"{refused[0]}; use {WEIGHTS_NAME} (load_exported) or {PT2_NAME} "
                             f"where written")
    model = rebuilt.float_model
    example = rebuilt.sweep.example.cpu()
    try:
        import onnxruntime
        # The exporter reports its steps on stdout; the CLI keeps stdout for its own output.
        with contextlib.redirect_stdout(io.StringIO()):
            torch.onnx.export(model, (example,), str(folder / ONNX_NAME), dynamo=True,
                              dynamic_shapes=_batch_dim(), input_names=["input"],
                              output_names=["logits"], verbose=False, external_data=False)
        session = onnxruntime.InferenceSession(str(folder / ONNX_NAME),
                                               providers=["CPUExecutionProvider"])
        logits = scores.logits(lambda x: torch.from_numpy(np.asarray(session.run(
            None, {"input": x.cpu().numpy()})[0])))
    except Exception as exc:
        raise_if_disk_full(exc, folder.parent, f"the export's {ONNX_NAME}")
        (folder / ONNX_NAME).unlink(missing_ok=True)
        return _not_exported(f"ONNX export failed: {described(exc)}")
    # An AMP variant's ONNX graph is fp32: held to the fp32 weights' own predictions.
    verification = scores.verify(logits, None if rebuilt.autocast is None
                                 else scores.float_reference)
    close = bool(torch.allclose(logits, scores.float_reference, **ONNX_TOLERANCE))
    verification.update(logits_match_pytorch=close, tolerance=ONNX_TOLERANCE)
    verification["ok"] = verification["ok"] and close
    note = (f"fp32 graph: the variant ran under {rebuilt.autocast} autocast, a run-time setting "
            f"ONNX does not carry" if rebuilt.autocast else None)
    return _checked(ONNX_NAME, folder, verification, note=note)
