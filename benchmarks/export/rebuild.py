"""A stored variant rebuilt as it ran, and the architecture that rebuilds its weights.

``rebuild`` prepares the run's sweep from its stored spec and builds the variant from the
weights cache, read-only (a miss refuses, never retrains), on the run's thread count; its
predictions must equal the stored correctness bits. ``architecture`` describes what a fresh
build needs to take the weights: the model and its source (the zoo, or the user's factory
file), classes, input shape and normalisation, autocast, INT8 mode/path/engine, and for
channel pruning the pruned tensor shapes and module attributes (``build_architecture``).
"""

from __future__ import annotations

import copy
import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from benchmarks.export.files import SOURCE_NAME

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


def cell_of(result) -> dict | None:
    """The runtime entry of a stored row that is a cell of another variant, else None."""
    runtime = result.runtime or {}
    return runtime if runtime.get("variant") not in (None, result.name) else None


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
        raise ValueError(f"variant {variant} {'failed' if result.failed else 'was n/a'} in run "
                         f"{run_id} ({result.error or result.not_applicable}); there is no "
                         f"model to export")
    return run, result


def _base_model(spec, techniques: list[str], config: dict) -> str:
    """The registry name (or FILE.py:FACTORY) the variant's float architecture starts from:
    what the last of its techniques (or its control) that declares an architecture says it
    is (distillation's student), the sweep's model otherwise."""
    from optimizers import registry
    base = spec.model
    for name in techniques:
        entry = registry.control(name) or registry.get(name)
        base = entry.architecture(config.get(name) or {}) or base
    return base


def _steps_of_kind(vspec, *kinds: str) -> list[str]:
    from optimizers import registry
    if vspec.control is not None:
        return list(vspec.techniques) if "weights" in kinds else []
    return [t for t in vspec.techniques if registry.get(t).export in kinds]


def _float_prefix(vspec):
    """The variant without the steps applied on top of its float weights (a conversion such
    as INT8's, a run-time setting such as AMP's): the float model they were applied to."""
    from benchmarks.spec.variant import VariantSpec
    keep = _steps_of_kind(vspec, "weights")
    settings = {t: s for t, s in vspec.settings if t in keep}
    return VariantSpec(f"{vspec.name} (float)", keep, settings)


def rebuild(run: dict, result, *, cache=None, allowed_models_dir=None, allowed_data_dir=None,
            should_stop=None) -> Rebuilt:
    """The stored variant rebuilt from the weights cache (read-only: nothing retrains), on
    the run's thread count, and checked: it must predict exactly what the run stored.
    ``should_stop`` is asked while the data loads and between the steps (Cancelled)."""
    import torch

    from benchmarks.measure.latency import pinned_threads
    from benchmarks.report.stats import pack_bits
    from benchmarks.run.cache import MissingWeights, WeightsCache
    from benchmarks.run.runner import ACCURACY_BATCH, prepare_sweep
    from benchmarks.spec.cancel import check_stop
    from benchmarks.spec.sweep import SweepSpec
    from optimizers.training import correctness

    spec = SweepSpec.from_dict(run["spec"])
    threads = (run.get("environment") or {}).get("threads")
    if threads:
        spec = dataclasses.replace(spec, threads=max(1, min(int(threads), os.cpu_count() or 1)))
    # A runtime cell stored without its eager row (a recommendation's runtime trial) rebuilds
    # its recipe; its bits are the runtime's, checked against the reloaded artefact instead.
    cell = cell_of(result)
    recipe = cell["variant"] if cell else result.name
    vspec = next(v for v in spec.variants if v.name == recipe)
    sweep = prepare_sweep(spec, cache=cache or WeightsCache(train_missing=False),
                          allowed_models_dir=allowed_models_dir,
                          allowed_data_dir=allowed_data_dir, should_stop=should_stop)
    check_stop(should_stop)
    ran_on = str(run.get("device") or "cpu").split(":")[0]
    if ran_on != sweep.device.type:
        raise ValueError(f"run {run['run_id']} ran on {run.get('device')}; its variants rebuild "
                         f"only on the same kind of device, and this machine gives "
                         f"{sweep.device.type}")
    try:
        with pinned_threads(sweep.threads):
            sweep.load_baseline()
            check_stop(should_stop)
            outcome = sweep.build_variant(vspec, sweep.context(lambda *_: None, variant=vspec,
                                                               shared={}))
            check_stop(should_stop)
            float_model = outcome.model
            if _steps_of_kind(vspec, "convert"):
                prefix = _float_prefix(vspec)
                float_model = sweep.build_variant(prefix, sweep.context(
                    lambda *_: None, variant=prefix, shared={})).model
            device = outcome.device or sweep.device
            model = outcome.model.to(device)
            model.eval()  # not chained: an exported graph's eval() returns None
            if sweep.data.labelled and result.scores.correct_bits and not cell:
                right = correctness(model, sweep.data.batches("test", ACCURACY_BATCH), device,
                                    outcome.autocast_dtype)
                if pack_bits(right) != result.scores.correct_bits:
                    raise ValueError(
                        f"variant {result.name} rebuilt here scores {sum(right) / len(right):.2%}"
                        f" where run {run['run_id']} stored {result.scores.accuracy:.2%}: its "
                        f"weights are no longer reproducible (another torch build, device or "
                        f"data?); nothing was written")
    except MissingWeights as exc:
        raise ValueError(f"variant {result.name} of run {run['run_id']} cannot be rebuilt "
                         f"exactly: {exc}. Run the same sweep again to refill the cache, then "
                         f"export (weights are never retrained for an export)") from None
    config = dict(result.config)
    autocast = None
    if outcome.autocast_dtype is not None:
        from benchmarks.measure.macs import dtype_precision  # torch, as the rebuild is
        autocast = dtype_precision(outcome.autocast_dtype)
    base = _base_model(spec, list(vspec.techniques), config)
    # A copy: for a float variant it is the model itself, which stays on its device.
    return Rebuilt(name=recipe, model=model,
                   float_model=copy.deepcopy(float_model).cpu().eval(),
                   device=device, autocast=autocast, sweep=sweep, result=result, config=config,
                   architecture=_architecture(sweep, base, float_model, config, autocast))


def _architecture(sweep, base: str, float_model, config: dict, autocast: str | None) -> dict:
    from benchmarks.zoo.models import is_user_model, user_model_digest
    data = sweep.data
    arch = {"model": base, "num_classes": data.num_classes, "in_channels": data.in_channels,
            "input_size": list(data.input_size), "input_shape": list(data.input_shape),
            "normalization": data.normalization, "autocast": autocast, "pruned": None}
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
    from optimizers import registry
    # The conversions a rebuild redoes (INT8's), each with the config it recorded, under its
    # technique's name; and whether the result's kernels run on the CPU whatever the device.
    convert = [t for t in registry.techniques() if t.export == "convert"]
    for technique in convert:
        arch[technique.name] = config.get(technique.name) or None
    arch["cpu_only"] = any(registry.get(t).cpu_only for t in config if t in registry.names())
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


def build_architecture(arch: dict, folder: Path | None = None, allowed_models_dir=None):
    """The model ``arch`` describes, with placeholder weights: fresh, pruned shapes applied,
    converted where it was (each technique's ``convert``: INT8's module structure)."""
    import torch

    from optimizers import registry
    model = _fresh(arch, folder, allowed_models_dir)
    _apply_shape_changes(model, arch.get("pruned"))
    for technique in registry.techniques():
        if technique.export == "convert" and arch.get(technique.name):
            model = technique.convert_fn()(model, arch[technique.name],
                                           torch.zeros(1, *arch["input_shape"]))
    return model.eval()
