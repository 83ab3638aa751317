"""INT8 quantization for PyTorch's x86 CPU backend: dynamic, static (PTQ) and QAT.

PyTorch's INT8 kernels (fbgemm / oneDNN) run on the CPU only, so every INT8 outcome runs on the
CPU (``Outcome.device``) and its config says so, even in a GPU sweep.

Static PTQ has two flows. The FX flow (``prepare_fx``/``convert_fx``) yields modules that call
the INT8 kernels directly in eager mode; torchao's pt2e flow (``X86InductorQuantizer``) yields
a graph of quantize/dequantize ops around float ops that only becomes INT8 code once
``torch.compile`` fuses it, which costs tens of seconds per model on a small CPU (see
docs/notes-optimizers.md). FX is therefore the primary path; pt2e is the fallback for models FX
cannot trace symbolically (Python control flow on tensor values/shapes), since torch.export
specialises shapes to the example input instead.

Quantized-engine choice: ``torch.backends.quantized.engine`` decides which library prepacks
the weights (at convert time) and runs them, so it is set explicitly before converting and
must stay set while the model runs. We set "fbgemm" when available: on this CPU it ran the FX
ResNet-18 faster than "x86" (which picks oneDNN or fbgemm by heuristics); the qconfig stays
the "x86" one (per-channel weights, reduce_range activations), valid for both.
"""

from __future__ import annotations

import copy
import itertools

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from .base import Context, Outcome
from .settings import Int8Settings
from .training import FINETUNE_LR_SCALE, fit

ENGINE_PREFERENCE = ("x86", "fbgemm")
DYNAMIC_TYPES = (nn.Linear, nn.LSTM, nn.GRU)
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


def float_flops_per_sample(model: nn.Module, example: torch.Tensor) -> int | None:
    """FLOPs of the float graph per sample: the counter cannot see quantized ops."""
    try:
        counter = FlopCounterMode(display=False)
        with torch.no_grad(), counter:
            model(example)
        return int(counter.get_total_flops() // max(example.shape[0], 1))
    except Exception:  # a counter failure must not sink the variant; the hint is optional
        return None


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


def _calibration(ctx: Context, n: int) -> list[torch.Tensor]:
    return [x.to(CPU) for x, _ in itertools.islice(ctx.train_batches(), n)]


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

def _dynamic(model: nn.Module) -> tuple[nn.Module, dict]:
    if not any(isinstance(m, DYNAMIC_TYPES) for m in model.modules()):
        raise RuntimeError("dynamic INT8 applies to Linear/LSTM/GRU layers and this model has "
                           "none; use static INT8 for convolutions")
    quantized = torch.ao.quantization.quantize_dynamic(model, set(DYNAMIC_TYPES),
                                                       dtype=torch.qint8)
    return quantized, {"path": "eager-dynamic"}


# ---- static: FX and pt2e ---------------------------------------------------------------------

def static_fx(model: nn.Module, calibration: list[torch.Tensor]) -> nn.Module:
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    prepared = prepare_fx(model.eval(), get_default_qconfig_mapping("x86"),
                          example_inputs=(calibration[0],))
    with torch.no_grad():
        for x in calibration:
            prepared(x)
    return convert_fx(prepared)


def static_pt2e(model: nn.Module, calibration: list[torch.Tensor],
                compile_model: bool = True) -> nn.Module:
    """torchao pt2e PTQ; ``compile_model`` runs torch.compile so INT8 kernels are used."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as xiq

    quantizer = xiq.X86InductorQuantizer()
    quantizer.set_global(xiq.get_default_x86_inductor_quantization_config())
    exported = torch.export.export(model.eval(), (calibration[0],)).module()
    prepared = prepare_pt2e(exported, quantizer)
    with torch.no_grad():
        for x in calibration:
            prepared(x)
    converted = convert_pt2e(prepared)
    # The engine calls .eval() on every model; exported graphs refuse it unless allowed.
    from torchao.quantization.pt2e import allow_exported_model_train_eval
    allow_exported_model_train_eval(converted)
    if not compile_model:
        return converted
    # Freezing lets Inductor fold the quantized weights into prepacked INT8 kernels; without
    # it the compiled graph still dequantizes to fp32. Passed as a compile option (not a
    # temporary config patch) so a recompile under another grad mode keeps it.
    compiled = torch.compile(converted, options={"freezing": True})
    with torch.no_grad():
        compiled(calibration[0])  # compile now, not inside the engine's timed warm-up
    return compiled


def _static(model: nn.Module, settings: Int8Settings, ctx: Context) -> tuple[nn.Module, dict]:
    calibration = _calibration(ctx, settings.calibration_batches)
    if not calibration:
        raise RuntimeError("static INT8 needs calibration batches and the training data is empty")
    try:
        return static_fx(copy.deepcopy(model), calibration), {"path": "fx"}
    except Exception as fx_exc:
        fx_reason = _one_line(fx_exc)
    try:
        # Uncompiled: with torch 2.14 + torchao 0.18 on this CPU, Inductor's freezing pass
        # fails (onednn.qconv_prepack unsupported) and without freezing the compiled graph
        # ran 3-20x slower than fp32 after 17-100 s of compiling (docs/notes-optimizers.md).
        quantized = static_pt2e(copy.deepcopy(model), calibration, compile_model=False)
    except Exception as exc:
        raise RuntimeError(f"static INT8 failed: FX ({fx_reason}); pt2e ({_one_line(exc)})") \
            from exc
    return quantized, {"path": "pt2e", "compiled": False, "fx_error": fx_reason,
                       "note": "pt2e reference graph: INT8 weights, float compute between "
                               "quantize/dequantize ops; not expected to be faster"}


# ---- QAT -------------------------------------------------------------------------------------

def _qat_build(model: nn.Module, example: torch.Tensor):
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


def _qat(model: nn.Module, settings: Int8Settings, ctx: Context) -> tuple[nn.Module, dict]:
    from torch.ao.quantization.quantize_fx import convert_fx

    example = ctx.example_input.to(CPU)
    build = _qat_build(model, example)
    try:
        build()  # untraceable graphs fail here, as one line, before any training
    except Exception as exc:
        raise RuntimeError(f"QAT needs an FX-traceable model: {_one_line(exc)}") from exc

    def train(prepared: nn.Module) -> None:
        fit(prepared, ctx.train_batches, settings.qat_epochs, device=ctx.device,
            lr=ctx.lr * FINETUNE_LR_SCALE,
            seed=ctx.seed, on_progress=lambda f: ctx.progress("int8 qat", f))

    key = ("int8-qat", settings.qat_epochs, ctx.lr * FINETUNE_LR_SCALE, ctx.seed)
    prepared = copy.deepcopy(ctx.train_cached(key, build, train)).to(CPU).eval()
    return convert_fx(prepared), {"path": "fx-qat"}


# ---- entry point -----------------------------------------------------------------------------

def apply(model: nn.Module, settings: Int8Settings, ctx: Context) -> Outcome:
    engine = select_engine()
    working = copy.deepcopy(model).to(CPU).eval()
    flops = float_flops_per_sample(working, ctx.example_input.to(CPU))
    ctx.progress("int8", 0.0)
    if settings.mode == "dynamic":
        quantized, extra = _dynamic(working)
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
    if ctx.device.type != "cpu":
        config["note"] = "PyTorch's x86 INT8 kernels are CPU-only: this variant ran on the CPU"
    quantized.eval()  # not chained: an exported graph's eval() returns None
    return Outcome(model=quantized, config={"int8": config}, device=CPU,
                   flops_hint=flops)
