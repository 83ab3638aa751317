"""OpenVINO's CPU plugin, from the same ONNX file as ONNX Runtime (``Core.read_model``).

Precision is asked for, never left to the default: on CPUs with bf16 the plugin's default
``INFERENCE_PRECISION_HINT`` is bf16, so a default "fp32" run is really bf16 (about 1.8x
faster than true fp32 on a Zen 4). An fp32 cell sets ``f32`` and records the hint the
compiled model reports; an AMP variant asks for its bf16/fp16, and where the CPU has none the
plugin runs f32 and the cell says so. What the kernels truly ran in comes from the runtime
graph (each layer's ``runtimePrecision``), which the census reads too.

An INT8 variant is quantized as a user deploying on OpenVINO would: ``nncf.quantize`` on the
float model with an ``nncf.Dataset`` over the engine's own calibration batches.

Telemetry is off before either library loads (no network at run time): NNCF's own switch
(``NNCF_CI``) and the openvino_telemetry package kept unimportable in this process, so
OpenVINO's tools and NNCF take the no-telemetry stubs they fall back to without it.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import time
from pathlib import Path

from benchmarks.measure import precisions
from benchmarks.runtimes.base import Prepared, RuntimeConfig, export_onnx
from benchmarks.runtimes.census import (count_openvino, openvino_float_precision,
                                        openvino_layers, ran_in)
from optimizers.errors import described


def hint(precision: str) -> str:
    """The INFERENCE_PRECISION_HINT a precision asks for: a float one's own OpenVINO
    precision (``measure.precisions``), fp32's for an integer one (NNCF quantizes the graph;
    what stays float runs in f32)."""
    p = precisions.get(precision)
    return (precisions.get(precisions.DEFAULT) if p.integer or not p.openvino else p).openvino[0]


def telemetry_off() -> None:
    """No telemetry from OpenVINO or NNCF in this process (they send usage data by default)."""
    os.environ.setdefault("NNCF_CI", "1")
    if "openvino_telemetry" not in sys.modules:
        sys.modules["openvino_telemetry"] = None  # import fails: the libraries' stubs


telemetry_off()


def quantize(ov_model, calibration):
    """NNCF's post-training INT8 of an OpenVINO model, on the engine's calibration batches."""
    import logging

    import nncf
    nncf.set_log_level(logging.ERROR)
    dataset = nncf.Dataset(calibration.batches, lambda batch: batch.detach().cpu().numpy())
    # Its progress bars would write over the CLI's output.
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return nncf.quantize(ov_model, dataset, subset_size=calibration.samples)


def _hint_name(value) -> str:
    """The OpenVINO precision ("f32", "bf16") a hint's value names ("<Type: 'bfloat16'>"):
    the float precisions' codes and dtype names, the longest first ("bfloat16" holds
    "float16")."""
    text = str(value).lower()
    pairs = [(p.openvino[0], name) for p in precisions.precisions()
             if not p.integer and p.openvino for name in (p.openvino[0], *p.dtypes)]
    for code, name in sorted(pairs, key=lambda pair: -len(pair[1])):
        if name in text:
            return code
    return text


def prepare(config: RuntimeConfig, model, example, *, calibration=None, workdir=None,
            onnx_path=None, **_) -> Prepared:
    import openvino as ov
    import torch
    t0 = time.perf_counter()
    workdir = Path(workdir)
    onnx_path = onnx_path or export_onnx(model, example, workdir / "model.onnx")
    core = ov.Core()
    ov_model = core.read_model(str(onnx_path))
    stem = "model.openvino"
    if precisions.get(config.precision).integer:
        stem = f"model.openvino-{config.precision}"
        try:
            ov_model = quantize(ov_model, calibration)
        except Exception as exc:
            raise RuntimeError(f"NNCF's quantize failed: {described(exc)}") from None
    asked = hint(config.precision)
    compiled = core.compile_model(ov_model, "CPU", {
        "INFERENCE_PRECISION_HINT": asked, "INFERENCE_NUM_THREADS": config.threads,
        "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY"})
    recorded = _hint_name(compiled.get_property("INFERENCE_PRECISION_HINT"))
    layers = openvino_layers(compiled)
    ops = count_openvino(layers, "OpenVINO's runtime graph (runtimePrecision)").to_dict()
    code = openvino_float_precision(layers) or recorded
    ran = precisions.by_openvino(code) or code
    precision = ran_in(ops, ran)
    notes = []
    if config.precision not in (precisions.DEFAULT, ran) and \
            not precisions.get(config.precision).integer and ran == precisions.DEFAULT:
        notes.append(f"asked {config.precision} (INFERENCE_PRECISION_HINT {asked}); this CPU "
                     f"has no {config.precision} kernels, so OpenVINO ran fp32")
    xml = workdir / f"{stem}.xml"
    if not xml.exists():
        ov.save_model(ov_model, str(xml), compress_to_fp16=False)
    request = compiled.create_infer_request()
    output = compiled.output(0)

    def call(x):
        # The request's output tensor is reused by its next call: a copy for the caller.
        return torch.from_numpy(request.infer({0: x.numpy()})[output].copy())
    return Prepared(fn=call, precision=precision, version=ov.get_version().split("-")[0],
                    prepare_s=time.perf_counter() - t0, ops=ops,
                    artefacts=[xml, xml.with_suffix(".bin")], notes=notes,
                    details={"device": "CPU", "precision_hint": {"asked": asked,
                                                                 "recorded": recorded},
                             "threads": config.threads})
