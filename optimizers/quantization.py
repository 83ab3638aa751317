"""INT8 quantization for PyTorch's x86 CPU backend: dynamic, static (PTQ) and QAT.

PyTorch's INT8 kernels (fbgemm / oneDNN) run on the CPU only, so every INT8 outcome runs on the
CPU (``Outcome.device``) and its config says so, even in a GPU sweep.

Static PTQ has two flows. The FX flow (``prepare_fx``/``convert_fx``) yields modules that call
the INT8 kernels directly in eager mode; torchao's pt2e flow (``X86InductorQuantizer``) yields
a graph of quantize/dequantize ops around float ops that only becomes INT8 code once
``torch.compile`` fuses it, which costs tens of seconds per model on a small CPU and failed
here (docs/optimizers.md). FX is therefore the primary path; pt2e, uncompiled, is the fallback
for models FX cannot trace symbolically (Python control flow on tensor values or shapes),
since torch.export specialises shapes to the example input instead (all but the batch
dimension, which stays dynamic), and for FX results that fail when run. QAT takes the same two
flows (``prepare_qat_fx``, else torchao's ``prepare_qat_pt2e``), chosen before any training.

Quantized-engine choice: ``torch.backends.quantized.engine`` decides which library prepacks
the weights (at convert time) and runs them, so it is set explicitly before converting and
must stay set while the model runs. "x86" is preferred (it ran the FX ResNet-18 and seed_cnn
faster than "fbgemm" on the CPUs measured, docs/optimizers.md), "fbgemm" where it is absent;
the qconfig is the "x86" one (per-channel weights, reduce_range activations), valid for both.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from optimizers.base import Context, Outcome, forward_seen
from optimizers.counting import count_flops
from optimizers.errors import described
from optimizers.schedules import parse_schedule, schedule_levels
from optimizers.settings import Int8Settings
from optimizers.training import FINETUNE_LR_SCALE, fit

ENGINE_PREFERENCE = ("x86", "fbgemm")
DYNAMIC_TYPES = (nn.Linear, nn.LSTM, nn.GRU)
# Subclasses of nn.Linear whose forward is F.linear(input, weight, bias) outside TorchScript.
# quantize_dynamic swaps modules by exact type, so these would silently stay float (timm's
# GhostNet and MobileNet heads): they are quantized as the nn.Linear they are.
PLAIN_LINEARS = ("timm.layers.linear.Linear",)
CPU = torch.device("cpu")


def select_engine() -> str:
    """Set and return the quantized engine (deterministic: the first supported preference)."""
    supported = torch.backends.quantized.supported_engines
    for engine in ENGINE_PREFERENCE:
        if engine in supported:
            torch.backends.quantized.engine = engine
            return engine
    raise RuntimeError("INT8 needs an x86 quantized engine (fbgemm/x86); this PyTorch build "
                       f"has only {', '.join(supported) or 'none'}")


def int8_weight_modules(model: nn.Module) -> dict[str, torch.dtype]:
    """{module name: weight dtype} for modules holding quantized weights (for tests/reports)."""
    found = {}
    for name, module in model.named_modules():
        weight = getattr(module, "weight", None)
        if callable(weight) and not isinstance(weight, nn.Module):
            try:
                w = weight()
            except Exception:
                continue
            if isinstance(w, torch.Tensor) and w.dtype in (torch.qint8, torch.quint8):
                found[name] = w.dtype
    for name, buf in model.named_buffers():
        if buf.dtype in (torch.int8, torch.uint8, torch.qint8):
            found[name] = buf.dtype
    return found


# ---- dynamic ---------------------------------------------------------------------------------

def float_groups(model: nn.Module, settings: Int8Settings) -> list[str]:
    """The groups a schedule keeps float (level 0), checked against the model's modules."""
    if not settings.schedule:
        return []
    levels = schedule_levels(settings.schedule)
    names = {n for n, _ in model.named_modules()}
    missing = sorted(set(levels) - names)
    if missing:
        raise ValueError(f"the schedule names modules this model does not have: "
                         f"{', '.join(missing[:8])}")
    return sorted(root for root, level in levels.items() if level == 0)


def _dynamic(model: nn.Module, example: torch.Tensor,
             kept: list[str] = ()) -> tuple[nn.Module, dict]:
    """Weights-only INT8 for the Linear/LSTM/GRU layers the forward pass calls. A layer whose
    weight its parent reads directly (Swin's attention passes ``qkv.weight`` to F.linear)
    would get a packed weight it cannot read, so it stays float and the config counts it."""
    layers = {name for name, m in model.named_modules() if isinstance(m, DYNAMIC_TYPES)}
    if not layers:
        weighted = [(name, type(m).__name__) for name, m in model.named_modules()
                    if isinstance(getattr(m, "weight", None), torch.Tensor)]
        last = f" (its last layer, {weighted[-1][0]}, is a {weighted[-1][1]})" if weighted \
            else ""
        raise RuntimeError(f"dynamic INT8 applies to Linear/LSTM/GRU layers and this model has "
                           f"none{last}; use static INT8 for convolutions")
    called: set[str] = set()
    forward_seen(model, example, lambda name, m, args: called.add(name), layers)
    modules = dict(model.named_modules())
    for name in called:
        cls = type(modules[name])
        if f"{cls.__module__}.{cls.__qualname__}" in PLAIN_LINEARS:
            modules[name].__class__ = nn.Linear  # ``model`` is the apply step's own copy
    # Other subclasses (their forward may do more than F.linear) stay float.
    quantizable = {name for name in called
                   if type(modules[name]) in DYNAMIC_TYPES} - set(kept)
    subclassed = sorted({type(modules[name]).__qualname__ for name in called - quantizable})
    if not quantizable and kept:
        raise RuntimeError("the schedule keeps every layer dynamic INT8 could quantize float")
    if not quantizable:
        raise RuntimeError(
            "dynamic INT8 found no layer it could quantize: "
            + (f"the model's Linear layers are subclasses ({', '.join(subclassed)}) whose "
               f"forward may differ from nn.Linear's" if subclassed else
               "the forward calls none of its Linear/LSTM/GRU layers (their parents read "
               "the weights directly)") + "; use static INT8")
    qconfig = torch.ao.quantization.default_dynamic_qconfig
    quantized = torch.ao.quantization.quantize_dynamic(
        model, {name: qconfig for name in quantizable}, dtype=torch.qint8)
    extra = {"path": "eager-dynamic"}
    if layers - quantizable - set(kept):
        extra["float_layers"] = len(layers - quantizable - set(kept))
    return quantized, extra


# ---- static: FX and pt2e ---------------------------------------------------------------------

def qconfig_mapping(float_groups=(), only=None):
    """The x86 mapping of static INT8, with the fused ops rooted at ``float_groups`` kept
    float; with ``only``, nothing but the ops rooted there quantized (each with its input,
    weight and output quantizers: what one cell of a sensitivity map measures)."""
    from torch.ao.quantization import (
        QConfigMapping,
        get_default_qconfig,
        get_default_qconfig_mapping,
    )
    if only is not None:
        mapping = QConfigMapping().set_global(None)
        for name in only:
            mapping.set_module_name(name, get_default_qconfig("x86"))
        return mapping
    mapping = get_default_qconfig_mapping("x86")
    for name in float_groups:
        mapping.set_module_name(name, None)
    return mapping


def static_fx(model: nn.Module, calibration: list[torch.Tensor], mapping=None) -> nn.Module:
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    prepared = prepare_fx(model.eval(), mapping or qconfig_mapping(),
                          example_inputs=(calibration[0],))
    with torch.no_grad():
        for x in calibration:
            prepared(x)
    return convert_fx(prepared)


def probe(model: nn.Module, example: torch.Tensor) -> None:
    """One forward pass that must not raise. A failing FX graph prints its generated code to
    stderr before raising; the exception alone says what failed, and stderr stays the
    progress bar's."""
    import contextlib
    import io
    with torch.no_grad(), contextlib.redirect_stderr(io.StringIO()):
        model(example)


def export(model: nn.Module, example: torch.Tensor) -> nn.Module:
    """torch.export's graph of ``model``, its batch dimension left dynamic: exported at the
    calibration batch, the graph must still score the test split in larger batches."""
    return torch.export.export(model, (example,),
                               dynamic_shapes=({0: torch.export.Dim.AUTO},)).module()


def static_pt2e(model: nn.Module, calibration: list[torch.Tensor]) -> nn.Module:
    """torchao pt2e PTQ, uncompiled: a reference graph (INT8 weights, float compute between
    quantize/dequantize ops). With torch 2.14 and torchao 0.18 on the CPUs measured, Inductor's
    freezing pass failed on onednn.qconv_prepack and, without freezing, the compiled graph ran
    3-20x slower than fp32 after 17-100 s of compiling (docs/optimizers.md)."""
    from torchao.quantization.pt2e import allow_exported_model_train_eval
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as xiq

    quantizer = xiq.X86InductorQuantizer()
    quantizer.set_global(xiq.get_default_x86_inductor_quantization_config())
    prepared = prepare_pt2e(export(model.eval(), calibration[0]), quantizer)
    with torch.no_grad():
        for x in calibration:
            prepared(x)
    converted = convert_pt2e(prepared)
    # The engine calls .eval() on every model; exported graphs refuse it unless allowed.
    allow_exported_model_train_eval(converted)
    return converted


def _static(model: nn.Module, settings: Int8Settings, ctx: Context) -> tuple[nn.Module, dict]:
    calibration = ctx.calibration(settings.calibration_batches)
    if not calibration:
        raise RuntimeError("static INT8 needs calibration batches and the training data is empty")
    kept = float_groups(model, settings)
    try:
        quantized = static_fx(copy.deepcopy(model), calibration, qconfig_mapping(kept))
        # Some converted graphs fail only when run (a quantized mean over a channels-last
        # tensor in ShuffleNet): one batch proves the FX result before it is taken.
        probe(quantized, calibration[0])
        return quantized, {"path": "fx"}
    except Exception as fx_exc:
        fx_reason = described(fx_exc)
    if kept:
        raise RuntimeError(f"a schedule's float groups need FX's static INT8, which failed "
                           f"here ({fx_reason})")
    try:
        quantized = static_pt2e(copy.deepcopy(model), calibration)
    except Exception as exc:
        raise RuntimeError(f"static INT8 failed: FX ({fx_reason}); pt2e ({described(exc)})") \
            from exc
    return quantized, {"path": "pt2e", "compiled": False, "fx_error": fx_reason,
                       "note": "pt2e reference graph: INT8 weights, float compute between "
                               "quantize/dequantize ops; not expected to be faster"}


def quantizer_groups(model: nn.Module, example: torch.Tensor, mode: str = "static"
                     ) -> list[dict]:
    """The groups a schedule keeps float or quantizes, [{"root", "modules", "observers"}].
    Static: one per fused op with a weight in FX's prepared graph (the convolution or linear
    layer the op is rooted at, the batch norm and ReLU folded into it, and its input, weight
    and output observers). Dynamic: one per Linear/LSTM/GRU layer the forward calls."""
    model = copy.deepcopy(model).to(CPU).eval()
    example = example.to(CPU)
    if mode == "dynamic":
        layers = {name for name, m in model.named_modules() if type(m) in DYNAMIC_TYPES}
        called: list[str] = []
        forward_seen(model, example, lambda name, m, args: called.append(name), layers)
        return [{"root": name, "modules": [name], "observers": ["weight"]}
                for name in dict.fromkeys(called)]
    from torch.ao.quantization.quantize_fx import prepare_fx
    import torch.fx
    select_engine()
    prepared = prepare_fx(copy.deepcopy(model), qconfig_mapping(), example_inputs=(example,))
    # Looked up by target, not from named_modules(): an observer shared by two ops (flatten's
    # input and output) is one module under two names, and named_modules() lists it once.
    fused = _Targets(prepared)
    graph_targets = {n.target for n in prepared.graph.nodes if n.op == "call_module"}
    traced = {n.target: n for n in torch.fx.symbolic_trace(model).graph.nodes
              if n.op == "call_module"}
    originals = dict(model.named_modules())
    groups = []
    for node in prepared.graph.nodes:
        module = fused.get(node.target) if node.op == "call_module" else None
        if not _weighted(module):
            continue
        observers = _input_observer(node, fused) + ["weight"]
        observers += [u.target for u in node.users if _is_observer(u, fused)]
        members = [node.target]
        step = traced.get(node.target)
        relu = "ReLU" in type(module).__name__
        while step is not None and len(step.users) == 1:
            step = next(iter(step.users))
            kind = originals.get(step.target) if step.op == "call_module" else None
            if isinstance(kind, nn.modules.batchnorm._BatchNorm) or (
                    relu and isinstance(kind, nn.ReLU)):
                if step.target not in graph_targets or isinstance(kind, nn.ReLU):
                    members.append(step.target)
                relu = relu and not isinstance(kind, nn.ReLU)
                continue
            break
        groups.append({"root": node.target, "modules": members, "observers": observers})
    return groups


class _Targets:
    """A graph module's submodules by a node's target."""

    def __init__(self, graph_module: nn.Module):
        self.graph_module = graph_module

    def get(self, target):
        try:
            return self.graph_module.get_submodule(target)
        except (AttributeError, TypeError):
            return None


def _weighted(module) -> bool:
    """A module with a weight, or a fused one whose first part has one (Conv+ReLU)."""
    from torch.ao.nn.intrinsic import _FusedModule
    if isinstance(module, _FusedModule):
        module = module[0]
    return isinstance(getattr(module, "weight", None), torch.Tensor)


def _input_observer(node, modules: dict) -> list[str]:
    """The observer quantizing an op's input: its argument's, or, through ops that share
    their input's quantization (flatten, reshape), the nearest one before them."""
    arg = node.args[0] if node.args else None
    for _ in range(8):
        if arg is None or not hasattr(arg, "op"):
            return []
        if _is_observer(arg, modules):
            return [arg.target]
        passes = arg.op in ("call_function", "call_method") or (
            arg.op == "call_module" and not _weighted(modules.get(arg.target)))
        arg = arg.args[0] if passes and arg.args else None
    return []


def _is_observer(node, modules: dict) -> bool:
    from torch.ao.quantization.observer import ObserverBase
    return getattr(node, "op", None) == "call_module" and \
        isinstance(modules.get(node.target), ObserverBase)


# ---- QAT ----------------------------------------------------------------------------------

def _qat_build_fx(model: nn.Module, example: torch.Tensor):
    from torch.ao.quantization import get_default_qat_qconfig_mapping
    from torch.ao.quantization.quantize_fx import prepare_qat_fx

    def build() -> nn.Module:
        prepared = prepare_qat_fx(copy.deepcopy(model).train(),
                                  get_default_qat_qconfig_mapping("x86"),
                                  example_inputs=(example,))
        # One observed pass in eval mode (running BN stats untouched) gives every per-channel
        # observer its final shape, so a cached state dict loads strictly into a fresh build.
        prepared.eval()
        with torch.no_grad():
            prepared(example)
        return prepared
    return build


def _qat_build_pt2e(model: nn.Module, example: torch.Tensor):
    """torchao's QAT flow on torch.export's graph, for models FX cannot trace or whose FX
    result cannot run; ``train()``/``eval()`` then switch its batch norms and observers."""
    from torchao.quantization.pt2e import allow_exported_model_train_eval
    from torchao.quantization.pt2e.quantize_pt2e import prepare_qat_pt2e
    from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as xiq

    quantizer = xiq.X86InductorQuantizer()
    quantizer.set_global(xiq.get_default_x86_inductor_quantization_config(is_qat=True))

    def build() -> nn.Module:
        prepared = prepare_qat_pt2e(export(copy.deepcopy(model).train(), example), quantizer)
        allow_exported_model_train_eval(prepared)
        prepared.eval()
        with torch.no_grad():
            prepared(example)
        return prepared
    return build


def _convert_fx(prepared: nn.Module) -> nn.Module:
    from torch.ao.quantization.quantize_fx import convert_fx
    return convert_fx(prepared)


def _convert_pt2e(prepared: nn.Module) -> nn.Module:
    from torchao.quantization.pt2e import allow_exported_model_train_eval
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e
    converted = convert_pt2e(prepared)
    allow_exported_model_train_eval(converted)
    return converted


def _qat(model: nn.Module, settings: Int8Settings, ctx: Context) -> tuple[nn.Module, dict]:
    """FX first (its modules call the INT8 kernels directly); torchao's pt2e where FX cannot
    trace the model or its converted graph cannot run, decided before any training."""
    # The observers' set-up pass sees a training batch: test images never shape the model.
    example = ctx.calibration(1)[0]
    extra = {"path": "fx-qat"}
    make, convert = _qat_build_fx(model, example), _convert_fx
    try:
        spare = [make()]
        # Converting the untrained build is cheap under FX and shows a graph that cannot run.
        probe(convert(copy.deepcopy(spare[0]).eval()), example)
    except Exception as fx_exc:
        extra = {"path": "pt2e-qat", "fx_error": described(fx_exc)}
        make, convert = _qat_build_pt2e(model, example), _convert_pt2e
        try:
            # No probe here: pt2e's convert takes a minute on a small CNN, and its reference
            # graph runs wherever the export did.
            spare = [make()]
        except Exception as exc:
            raise RuntimeError(f"QAT failed: FX ({extra['fx_error']}); pt2e "
                               f"({described(exc)})") from exc

    def build() -> nn.Module:
        # The first build (probed) is handed out first: an export takes seconds.
        return spare.pop() if spare else make()

    def train(prepared: nn.Module, data) -> None:
        fit(prepared, data, settings.qat_epochs, device=ctx.device,
            lr=ctx.budget.lr * FINETUNE_LR_SCALE,
            seed=ctx.budget.seed, on_progress=lambda f: ctx.progress("int8 qat", f))

    # The FX flow keeps its key, so weights cached before the pt2e fallback stay valid.
    key = ("int8-qat", settings.qat_epochs, ctx.budget.lr * FINETUNE_LR_SCALE, ctx.budget.seed) + \
        (() if extra["path"] == "fx-qat" else (extra["path"],))
    prepared = copy.deepcopy(ctx.train_cached(key, build, train)).to(CPU)
    prepared.eval()  # not chained: an exported graph's eval() returns None
    return convert(prepared), extra


# ---- entry point -----------------------------------------------------------------------------

def apply(model: nn.Module, settings: Int8Settings, ctx: Context) -> Outcome:
    engine = select_engine()
    working = copy.deepcopy(model).to(CPU).eval()
    # The counter cannot see quantized kernels: the float graph's count stands for them.
    flops = count_flops(working, ctx.data.example_input.to(CPU))
    ctx.progress("int8", 0.0)
    if settings.mode == "dynamic":
        quantized, extra = _dynamic(working, ctx.data.example_input[:1].to(CPU),
                                    float_groups(working, settings))
    elif settings.mode == "static":
        quantized, extra = _static(working, settings, ctx)
    else:
        quantized, extra = _qat(working, settings, ctx)
    if not int8_weight_modules(quantized):
        raise RuntimeError(f"{settings.mode} INT8 found no layer it could quantize in this model")
    ctx.progress("int8", 1.0)
    config = {"mode": settings.mode, **extra, "engine": engine, "ran_on": "cpu"}
    if settings.mode == "static":
        config["calibration_batches"] = settings.calibration_batches
    if settings.mode == "qat":
        config["qat_epochs"] = settings.qat_epochs
    if settings.schedule:
        config["schedule"] = parse_schedule(settings.schedule)
    if ctx.device.type != "cpu":
        config["note"] = "PyTorch's x86 INT8 kernels are CPU-only: this variant ran on the CPU"
    quantized.eval()  # not chained: an exported graph's eval() returns None
    return Outcome(model=quantized, config={"int8": config}, device=CPU,
                   flops_hint=flops)


def rebuild_structure(model, int8: dict, example):
    """The INT8 module structure a variant's weights load into, from the config it recorded
    (mode, path, engine): the same conversion of the same float model (its weights, scales
    and zero points are then loaded over it). What an export rebuilds INT8 with."""
    engine = int8.get("engine")
    if engine not in torch.backends.quantized.supported_engines:
        raise RuntimeError(f"the INT8 weights were packed for the {engine} engine, which this "
                           f"PyTorch lacks")
    torch.backends.quantized.engine = engine
    kept = sorted(root for root, level in schedule_levels(int8["schedule"]).items()
                  if level == 0) if int8.get("schedule") else []
    if int8["mode"] == "dynamic":
        layers = {name for name, m in model.named_modules()
                  if isinstance(m, DYNAMIC_TYPES)} - set(kept) if kept else set(DYNAMIC_TYPES)
        return torch.ao.quantization.quantize_dynamic(model, layers, dtype=torch.qint8)
    if int8.get("path") not in ("fx", "fx-qat"):
        raise RuntimeError("a pt2e INT8 graph has no module structure to rebuild; load its "
                           "exported program (.pt2) instead")
    from torch.ao.quantization import get_default_qat_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx, prepare_qat_fx
    if int8["path"] == "fx-qat":
        prepared = prepare_qat_fx(model.train(), get_default_qat_qconfig_mapping("x86"),
                                  example_inputs=(example,))
    else:
        prepared = prepare_fx(model.eval(), qconfig_mapping(kept), example_inputs=(example,))
    prepared.eval()
    with torch.no_grad():
        prepared(example)  # observers take their shapes; the values are overwritten on load
    return convert_fx(prepared)
