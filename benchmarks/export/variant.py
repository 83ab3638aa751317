"""The model as files: a stored run's variant, rebuilt and written for use outside this tool.

``export_variant(store, run_id, variant, out_dir)`` writes into ``out_dir``:

- ``model.safetensors``: the weights (INT8 ones as integer values with their scales and zero
  points), and in its metadata the architecture needed to rebuild them: the model's source,
  the techniques' settings, and for channel-pruned models the pruned shapes.
  ``load_exported(out_dir)`` rebuilds the model from it.
- ``model.pt2``: a ``torch.export`` ExportedProgram (``torch.export.load``), where the
  variant exports; AMP's autocast is traced into the graph.
- ``model.onnx``: for float variants (the fp32 graph; an AMP variant's autocast is a run-time
  setting ONNX does not carry), checked under onnxruntime.
- ``model_card.json``: techniques, settings, metrics with their intervals, the environment,
  each format's status (written, or why not) and verification, and every file's SHA-256.

Nothing is kept twice: trained weights are rebuilt from the weights cache (the runner's
per-step keys), never retrained. A variant whose weights are gone, or that rebuilt here
predicts differently from what the run stored, is refused in one line, before anything is
written. Every written artefact is reloaded and scored on the run's test split: it must
reproduce the stored predictions (or the accuracy within ``ACCURACY_TOLERANCE_PTS``).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import io
import json
import os
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

CARD_NAME = "model_card.json"
WEIGHTS_NAME = "model.safetensors"
PT2_NAME = "model.pt2"
ONNX_NAME = "model.onnx"
SOURCE_NAME = "model_source.py"
FORMATS = ("safetensors", "pt2", "onnx")
CARD_SCHEMA = 1
# A reloaded artefact passes with the same predictions, or an accuracy this close (points).
ACCURACY_TOLERANCE_PTS = 0.1
# onnxruntime's logits against PyTorch's for the same fp32 weights: kernels sum in another
# order, so float rounding differs (max differences of 1e-6 to 1e-5 were seen here).
ONNX_TOLERANCE = {"rtol": 1e-3, "atol": 1e-4}
EVAL_BATCH = 256
# Module attributes that may describe a shape (what channel pruning changes besides tensors).
_SIMPLE = (int, float, bool, str, tuple, list)


@dataclass
class Rebuilt:
    """A stored variant rebuilt as it ran, and what exporting it needs."""
    name: str
    model: object            # nn.Module as the variant ran (INT8 included)
    float_model: object      # the float model before INT8 (the model itself otherwise)
    device: object           # torch.device it runs on
    autocast: str | None     # "bf16" / "fp16" under AMP, else None
    sweep: object            # the PreparedSweep (data, example batch)
    result: object           # the stored VariantResult
    config: dict             # the settings applied, as the run recorded them
    architecture: dict


# -- locating and rebuilding ----------------------------------------------------------------

def locate(store, run_id: str, variant: str) -> tuple[dict, object]:
    """(run, stored VariantResult) or a one-line ValueError naming what exists."""
    from benchmarks.report.results import VariantResult
    run = store.run(run_id)
    if run is None:
        raise ValueError(f"run {run_id!r} is not in the store {store.path}; `history` lists "
                         f"the runs")
    if run.get("kind", "sweep") != "sweep":
        raise ValueError(f"run {run_id} is a {run['kind']} run: only sweeps have models to "
                         f"export")
    names = [v["name"] for v in run["variants"]]
    if variant not in names:
        raise ValueError(f"variant {variant!r} is not in run {run_id}; its variants: "
                         f"{', '.join(names) or 'none yet'}")
    result = VariantResult.from_dict(run["variants"][names.index(variant)])
    if not result.ok:
        raise ValueError(f"variant {variant} failed in run {run_id} ({result.error}); there is "
                         f"no model to export")
    return run, result


def _base_model(spec, techniques: list[str], config: dict) -> str:
    """The registry name (or FILE.py:FACTORY) the variant's float architecture starts from:
    a student's for distillation and its scratch control, the sweep's model otherwise (a
    pruned model recovered by distillation keeps the teacher's architecture)."""
    from optimizers import registry
    if len(techniques) == 1 and registry.control(techniques[0]) is not None:
        return config[techniques[0]]["student"]
    distill = config.get("distill") or {}
    if "distill" in techniques and distill.get("mode") != "recover":
        return distill["student"]
    return spec.model


def _float_prefix(vspec):
    """The variant without its INT8 and AMP steps: the float model INT8 quantized."""
    from benchmarks.spec.variant import VariantSpec
    keep = [t for t in vspec.techniques if t not in ("int8", "amp")]
    settings = {t: s for t, s in vspec.settings if t in keep}
    return VariantSpec(f"{vspec.name} (float)", keep, settings)


def rebuild(run: dict, result, *, cache=None, allowed_models_dir=None) -> Rebuilt:
    """The stored variant rebuilt from the weights cache (read-only: nothing retrains), on
    the run's thread count, and checked: it must predict exactly what the run stored."""
    import torch

    from benchmarks.measure.latency import pinned_threads
    from benchmarks.report.stats import pack_bits
    from benchmarks.run.cache import MissingWeights, WeightsCache
    from benchmarks.run.runner import ACCURACY_BATCH, prepare_sweep
    from benchmarks.spec.sweep import SweepSpec
    from optimizers.training import correctness

    spec = SweepSpec.from_dict(run["spec"])
    threads = (run.get("environment") or {}).get("threads")
    if threads:
        spec = dataclasses.replace(spec, threads=max(1, min(int(threads), os.cpu_count() or 1)))
    vspec = next(v for v in spec.variants if v.name == result.name)
    sweep = prepare_sweep(spec, cache=cache or WeightsCache(train_missing=False),
                          allowed_models_dir=allowed_models_dir)
    ran_on = str(run.get("device") or "cpu").split(":")[0]
    if ran_on != sweep.device.type:
        raise ValueError(f"run {run['run_id']} ran on {run.get('device')}; its variants rebuild "
                         f"only on the same kind of device, and this machine gives "
                         f"{sweep.device.type}")
    try:
        with pinned_threads(sweep.threads):
            sweep.load_baseline()
            outcome = sweep.build_variant(vspec, sweep.context(lambda *_: None, variant=vspec,
                                                               shared={}))
            float_model = outcome.model
            if "int8" in vspec.techniques:
                prefix = _float_prefix(vspec)
                float_model = sweep.build_variant(prefix, sweep.context(
                    lambda *_: None, variant=prefix, shared={})).model
            device = outcome.device or sweep.device
            model = outcome.model.to(device)
            model.eval()  # not chained: an exported graph's eval() returns None
            if sweep.data.labelled and result.correct_bits:
                right = correctness(model, sweep.data.batches("test", ACCURACY_BATCH), device,
                                    outcome.autocast_dtype)
                if pack_bits(right) != result.correct_bits:
                    raise ValueError(
                        f"variant {result.name} rebuilt here scores {sum(right) / len(right):.2%}"
                        f" where run {run['run_id']} stored {result.accuracy:.2%}: its weights "
                        f"are no longer reproducible (another torch build, device or data?); "
                        f"nothing was written")
    except MissingWeights as exc:
        raise ValueError(f"variant {result.name} of run {run['run_id']} cannot be rebuilt "
                         f"exactly: {exc}. Run the same sweep again to refill the cache, then "
                         f"export (weights are never retrained for an export)") from None
    config = dict(result.config)
    autocast = None
    if outcome.autocast_dtype is not None:
        autocast = {torch.bfloat16: "bf16", torch.float16: "fp16"}[outcome.autocast_dtype]
    base = _base_model(spec, list(vspec.techniques), config)
    # A copy: for a float variant it is the model itself, which stays on its device.
    return Rebuilt(name=result.name, model=model,
                   float_model=copy.deepcopy(float_model).cpu().eval(),
                   device=device, autocast=autocast, sweep=sweep, result=result, config=config,
                   architecture=_architecture(sweep, base, float_model, config, autocast))


# -- the architecture: what rebuilding the weights needs -------------------------------------

def _architecture(sweep, base: str, float_model, config: dict, autocast: str | None) -> dict:
    from benchmarks.zoo.models import is_user_model, user_model_digest
    data = sweep.data
    arch = {"model": base, "num_classes": data.num_classes, "in_channels": data.in_channels,
            "input_size": list(data.input_size), "input_shape": list(data.input_shape),
            "normalization": data.normalization, "autocast": autocast, "int8": None,
            "pruned": None}
    if is_user_model(base):
        arch["source"] = {"kind": "file", "file": SOURCE_NAME, "factory": base.rsplit(":", 1)[1],
                          "sha256_16": user_model_digest(base)}
    else:
        from benchmarks.measure.environment import git_commit
        arch["source"] = {"kind": "zoo", "builder": "benchmarks.zoo.models.create_model",
                          "name": base, "git_commit": git_commit()}
    try:
        arch["pruned"] = _shape_changes(_fresh(arch, None, sweep.allowed_models_dir),
                                        float_model)
    except RuntimeError as exc:  # the weights can still ship in the other formats
        arch["not_rebuildable"] = str(exc)
    int8 = config.get("int8")
    if int8:
        arch["int8"] = {k: int8.get(k) for k in ("mode", "path", "engine")}
        arch["int8"]["qconfig"] = "x86"
    return arch


def _fresh(arch: dict, folder: Path | None, allowed_models_dir=None):
    """The untrained, unpruned float model ``arch`` starts from."""
    from benchmarks.zoo.models import build_model
    model = arch["model"]
    if arch["source"]["kind"] == "file" and folder is not None:
        model = f"{folder / SOURCE_NAME}:{arch['source']['factory']}"
        allowed_models_dir = None  # the exported copy, next to its weights
    return build_model(model, arch["num_classes"], arch["in_channels"],
                       tuple(arch["input_size"]), allowed_models_dir).eval()


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def _shape_changes(fresh, model) -> dict | None:
    """{module: {"tensors": {name: shape}, "attributes": {name: value}}} where ``model``
    differs from ``fresh`` (channel pruning's pruned shapes); None where nothing does. A
    structure that differs otherwise (another module tree) cannot be described: refused."""
    import itertools
    mine, theirs = dict(model.named_modules()), dict(fresh.named_modules())
    # By name: a user's factory file loaded twice defines its classes twice.
    if list(mine) != list(theirs) or any(type(mine[n]).__qualname__ != type(
            theirs[n]).__qualname__ for n in mine):
        raise RuntimeError("the variant's module tree differs from a fresh build of its "
                           "model beyond tensor shapes")
    changes = {}
    for name, module in mine.items():
        ref = theirs[name]
        tensors = {k: list(v.shape) for k, v in itertools.chain(
            module.named_parameters(recurse=False), module.named_buffers(recurse=False))
            if v is not None and tuple(v.shape) != tuple(getattr(ref, k).shape)}
        attributes = {k: _plain(v) for k, v in vars(module).items()
                      if not k.startswith("__") and k != "training" and isinstance(v, _SIMPLE)
                      and vars(ref).get(k) != v}
        if tensors or attributes:
            changes[name] = {"tensors": tensors, "attributes": attributes}
    return changes or None


def _apply_shape_changes(model, changes: dict | None) -> None:
    import torch
    from torch import nn
    for name, change in (changes or {}).items():
        module = model.get_submodule(name)
        for attr, value in change["attributes"].items():
            setattr(module, attr, tuple(value) if isinstance(getattr(module, attr, None), tuple)
                    else value)
        for tensor, shape in change["tensors"].items():
            old = getattr(module, tensor)
            new = torch.zeros(shape, dtype=old.dtype)
            if isinstance(old, nn.Parameter):
                setattr(module, tensor, nn.Parameter(new, requires_grad=old.requires_grad))
            else:
                module.register_buffer(
                    tensor, new, persistent=tensor not in module._non_persistent_buffers_set)


def _quantized_structure(model, int8: dict, example):
    """The INT8 module structure the variant's weights load into: the same conversion of the
    same float model (the weights, scales and zero points are then loaded over it)."""
    import torch

    from optimizers.quantization import DYNAMIC_TYPES

    engine = int8.get("engine")
    if engine not in torch.backends.quantized.supported_engines:
        raise RuntimeError(f"the INT8 weights were packed for the {engine} engine, which this "
                           f"PyTorch lacks")
    torch.backends.quantized.engine = engine
    if int8["mode"] == "dynamic":
        return torch.ao.quantization.quantize_dynamic(model, set(DYNAMIC_TYPES),
                                                      dtype=torch.qint8)
    if int8.get("path") not in ("fx", "fx-qat"):
        raise RuntimeError("a pt2e INT8 graph has no module structure to rebuild; load "
                           f"{PT2_NAME} instead")
    from torch.ao.quantization import get_default_qat_qconfig_mapping, get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx, prepare_qat_fx
    if int8["path"] == "fx-qat":
        prepared = prepare_qat_fx(model.train(), get_default_qat_qconfig_mapping("x86"),
                                  example_inputs=(example,))
    else:
        prepared = prepare_fx(model.eval(), get_default_qconfig_mapping("x86"),
                              example_inputs=(example,))
    prepared.eval()
    with torch.no_grad():
        prepared(example)  # observers take their shapes; the values are overwritten on load
    return convert_fx(prepared)


def build_architecture(arch: dict, folder: Path | None = None, allowed_models_dir=None):
    """The model ``arch`` describes, with placeholder weights: fresh, pruned shapes applied,
    converted to INT8 where it was."""
    import torch
    model = _fresh(arch, folder, allowed_models_dir)
    _apply_shape_changes(model, arch.get("pruned"))
    if arch.get("int8"):
        model = _quantized_structure(model, arch["int8"], torch.zeros(1, *arch["input_shape"]))
    return model.eval()


# -- safetensors: any state dict, INT8 included ---------------------------------------------

def encode_state(state: dict) -> tuple[dict, dict]:
    """(tensors, layout): a state dict as plain tensors for safetensors, and how to put it
    back. Quantized tensors become their integer values plus scales and zero points; the
    tuples and dtypes of packed INT8 parameters are described in the layout."""
    tensors: dict = {}
    entries = {key: _encode(key, value, tensors) for key, value in state.items()}
    # Each module's state version: a quantized layer reads its packed weights by it.
    versions = {k: dict(v) for k, v in getattr(state, "_metadata", {}).items()}
    return tensors, {"entries": entries, "module_metadata": versions}


def _encode(key: str, value, tensors: dict) -> dict:
    import torch
    if value is None:
        return {"kind": "none"}
    if isinstance(value, torch.dtype):
        return {"kind": "dtype", "value": str(value).removeprefix("torch.")}
    if isinstance(value, (tuple, list)):
        return {"kind": "tuple", "items": [_encode(f"{key}/{i}", v, tensors)
                                           for i, v in enumerate(value)]}
    if not isinstance(value, torch.Tensor):
        raise RuntimeError(f"state {key} holds a {type(value).__name__}, not a tensor")
    value = value.detach().cpu()
    if not value.is_quantized:
        tensors[key] = value.clone().contiguous()
        return {"kind": "tensor"}
    tensors[key] = value.int_repr().clone().contiguous()
    dtype = str(value.dtype).removeprefix("torch.")
    if value.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        return {"kind": "quantized", "dtype": dtype, "scale": value.q_scale(),
                "zero_point": value.q_zero_point()}
    tensors[f"{key}/scales"] = value.q_per_channel_scales().clone().contiguous()
    tensors[f"{key}/zero_points"] = value.q_per_channel_zero_points().clone().contiguous()
    return {"kind": "quantized", "dtype": dtype, "axis": value.q_per_channel_axis()}


def decode_state(tensors: dict, layout: dict) -> dict:
    from collections import OrderedDict
    state = OrderedDict((key, _decode(key, entry, tensors))
                        for key, entry in layout["entries"].items())
    state._metadata = OrderedDict(layout["module_metadata"])
    return state


def _decode(key: str, entry: dict, tensors: dict):
    import torch
    kind = entry["kind"]
    if kind == "none":
        return None
    if kind == "dtype":
        return getattr(torch, entry["value"])
    if kind == "tuple":
        return tuple(_decode(f"{key}/{i}", e, tensors) for i, e in enumerate(entry["items"]))
    if kind == "tensor":
        return tensors[key]
    ints = tensors[key]
    dtype = getattr(torch, entry["dtype"])
    if "axis" in entry:
        return torch._make_per_channel_quantized_tensor(
            ints, tensors[f"{key}/scales"], tensors[f"{key}/zero_points"], entry["axis"])
    q = torch._make_per_tensor_quantized_tensor(ints, entry["scale"], entry["zero_point"])
    return q if q.dtype == dtype else torch.quantize_per_tensor(
        q.dequantize(), entry["scale"], entry["zero_point"], dtype)


@dataclass
class Loaded:
    model: object
    autocast: str | None
    device: object
    card: dict

    def __call__(self, x):
        """Logits for a batch of normalised inputs, under the variant's autocast."""
        return _run(self.model, x, self.device, self.autocast).float()


def load_exported(folder: str | Path, device: str = "cpu") -> Loaded:
    """The model of an export folder, rebuilt from ``model.safetensors`` and the architecture
    in its metadata (the zoo, or the copied factory file). INT8 models run on the CPU."""
    import torch
    from safetensors import safe_open
    folder = Path(folder)
    path = folder / WEIGHTS_NAME
    if not path.is_file():
        raise ValueError(f"{folder} holds no {WEIGHTS_NAME}; export a variant there first")
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    arch = json.loads(meta["architecture"])
    model = build_architecture(arch, folder)
    model.load_state_dict(decode_state(tensors, json.loads(meta["layout"])), strict=True)
    card_path = folder / CARD_NAME
    card = json.loads(card_path.read_text()) if card_path.is_file() else {}
    device = torch.device("cpu" if arch.get("int8") else device)
    return Loaded(model=model.to(device).eval(), autocast=arch.get("autocast"), device=device,
                  card=card)


# -- writing and checking each format ---------------------------------------------------------

class _Scores:
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
        self.reference = self.logits(lambda x: _run(rebuilt.model, x, rebuilt.device,
                                                    rebuilt.autocast))
        self.float_reference = self.reference if rebuilt.autocast is None else self.logits(
            lambda x: _run(rebuilt.float_model, x, torch.device("cpu"), None))

    def logits(self, fn):
        import torch
        return torch.cat([fn(x).float().cpu() for x, _ in self.batches])

    def verify(self, logits, reference=None) -> dict:
        """Same predictions as the reference (by default the variant as stored), or its
        accuracy within the tolerance; and how far the logits are from the reference's."""
        import torch

        from benchmarks.report.stats import pack_bits
        expected = self.rebuilt.result.accuracy
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
            pack_bits(right) == self.rebuilt.result.correct_bits
        out.update(accuracy=accuracy, expected_accuracy=expected,
                   stored_accuracy=self.rebuilt.result.accuracy, same_predictions=same,
                   accuracy_change_pts=100 * (accuracy - expected))
        out["ok"] = same or abs(out["accuracy_change_pts"]) <= ACCURACY_TOLERANCE_PTS
        return out

    def _right(self, logits) -> list[bool]:
        import torch
        labels = torch.cat([y for _, y in self.batches])
        return (logits.argmax(1) == labels).tolist()



def _run(model, x, device, autocast):
    import torch

    from optimizers.precision import autocast as autocast_ctx
    with torch.inference_mode(), autocast_ctx(device.type, autocast):
        return model(x.to(device))


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


def write_weights(rebuilt: Rebuilt, folder: Path, scores: _Scores) -> dict:
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
        (folder / WEIGHTS_NAME).unlink(missing_ok=True)
        return _not_exported(f"rebuilding from the weights failed: {described(exc)}")
    return _checked(WEIGHTS_NAME, folder, scores.verify(scores.logits(loaded)),
                    note="rebuild with benchmarks.export.load_exported(folder)")


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


# torchao's pt2e INT8 graphs call these ops; torch registers them only once this is imported.
PT2E_OPS_MODULE = "torch.ao.quantization.fx._decomposed"


def load_program(folder: str | Path):
    """The export folder's ExportedProgram as a callable module (``torch.export.load``, with
    the quantize/dequantize ops a pt2e INT8 graph calls registered first)."""
    import importlib

    import torch
    importlib.import_module(PT2E_OPS_MODULE)
    return torch.export.load(str(Path(folder) / PT2_NAME)).module()


def write_pt2(rebuilt: Rebuilt, folder: Path, scores: _Scores) -> dict:
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
        logits = scores.logits(lambda x: _run(loaded, x, rebuilt.device, None))
    except Exception as exc:
        (folder / PT2_NAME).unlink(missing_ok=True)
        what = "INT8 model" if rebuilt.config.get("int8") else "model"
        return _not_exported(f"torch.export cannot trace this {what}: {described(exc)}")
    notes = ["autocast traced into the graph"] if rebuilt.autocast else []
    if rebuilt.config.get("int8"):
        notes.append(f"quantize/dequantize ops: import {PT2E_OPS_MODULE} before "
                     f"torch.export.load (benchmarks.export.load_program does)")
    return _checked(PT2_NAME, folder, scores.verify(logits), note="; ".join(notes) or None)


def write_onnx(rebuilt: Rebuilt, folder: Path, scores: _Scores) -> dict:
    import numpy as np
    import torch

    from optimizers.errors import described
    if rebuilt.config.get("int8"):
        return _not_exported(
            "ONNX is written for float variants: this INT8 variant runs PyTorch's quantized "
            "CPU kernels (weights packed for the x86 engine), which torch.onnx does not "
            f"translate; use {WEIGHTS_NAME} (load_exported) or {PT2_NAME} where written")
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


# -- the whole export -------------------------------------------------------------------------

def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _prepare_folder(out_dir: str | Path) -> Path:
    folder = Path(out_dir).expanduser()
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--out {folder} is a file; give a folder")
    if not folder.parent.is_dir():
        raise ValueError(f"--out {folder}: folder {folder.parent} does not exist")
    folder.mkdir(exist_ok=True)
    for name in (CARD_NAME, WEIGHTS_NAME, PT2_NAME, ONNX_NAME, SOURCE_NAME):
        (folder / name).unlink(missing_ok=True)  # nothing stale from an earlier export
    return folder


def export_variant(store, run_id: str, variant: str, out_dir: str | Path, *, cache=None,
                   allowed_models_dir=None) -> dict:
    """Write ``variant`` of run ``run_id`` into ``out_dir`` (see the module's docstring);
    returns the model card. Bad input raises ValueError with one line; nothing is written
    then."""
    from benchmarks.measure.environment import environment_card
    from benchmarks.measure.latency import pinned_threads
    from benchmarks.report.document import RunReport
    run, result = locate(store, run_id, variant)
    if Path(out_dir).expanduser().exists() and not Path(out_dir).expanduser().is_dir():
        raise ValueError(f"--out {out_dir} is a file; give a folder")
    rebuilt = rebuild(run, result, cache=cache, allowed_models_dir=allowed_models_dir)
    folder = _prepare_folder(out_dir)
    with pinned_threads(rebuilt.sweep.threads):
        scores = _Scores(rebuilt)
        formats = {"safetensors": write_weights(rebuilt, folder, scores),
                   "pt2": write_pt2(rebuilt, folder, scores),
                   "onnx": write_onnx(rebuilt, folder, scores)}
    report = RunReport.from_stored(run)
    document = next(v for v in report.document()["variants"] if v["name"] == variant)
    document.pop("raw", None)
    files = {p.name: {"sha256": _sha256(p), "bytes": p.stat().st_size}
             for p in sorted(folder.iterdir()) if p.name != CARD_NAME and p.is_file()}
    card = {
        "schema": CARD_SCHEMA, "run_id": run_id, "variant": variant,
        "model": run.get("model"), "dataset": run.get("dataset"),
        "techniques": list(result.techniques), "settings": rebuilt.config,
        "axes": dict(result.axes), "metrics": document,
        "baseline": report.baseline,
        "input": {"shape": ["batch", *rebuilt.architecture["input_shape"]], "dtype": "float32",
                  "normalization": rebuilt.architecture["normalization"],
                  "note": "pixels in [0, 1], then normalised as above; the output is logits"},
        "architecture": rebuilt.architecture, "device": str(rebuilt.device),
        "formats": formats, "files": files,
        "environment": run.get("environment") or {},
        "exported": {"at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                     "environment": environment_card(rebuilt.sweep.device,
                                                     rebuilt.sweep.threads)},
    }
    (folder / CARD_NAME).write_text(json.dumps(card, indent=2, default=str))
    return card


def archive_path(folder: str | Path) -> Path:
    """Where ``archive`` puts the zip of an export folder: beside it, named after it."""
    folder = Path(folder)
    return folder.with_name(folder.name + ".zip")


def archive(folder: str | Path) -> Path:
    """The export folder zipped beside it (the dashboard's download)."""
    return Path(shutil.make_archive(str(archive_path(folder))[:-len(".zip")], "zip",
                                    root_dir=folder))


def export_folder(store_path: str | Path, run_id: str, variant: str) -> Path:
    """Where the dashboard's export of ``variant`` lands: beside the store, per run."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in variant)
    return Path(store_path).with_name("exports") / run_id / safe

