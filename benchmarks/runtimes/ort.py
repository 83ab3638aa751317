"""ONNX Runtime: the variant's fp32 ONNX graph under every graph optimisation
(``ORT_ENABLE_ALL``), on the CPU provider (the CUDA provider for a CUDA variant, where the
build has it), with the session's intra-op threads set to the cell's.

An INT8 variant is quantized the way a user deploying on ONNX Runtime would: its float graph
pre-processed (``quant_pre_process``: shape inference, folding) then ``quantize_static`` in
QDQ form, per-channel weights, unsigned activations and signed weights (U8S8: what the x86
kernels fuse into ``QLinearConv``; the default signed activations left 11 of ResNet-18's 21
convs in float here and on a Zen 4), calibrated by a ``CalibrationDataReader`` that pulls the
engine's own calibration batches. The census reads the graph the session optimised
(``SessionOptions.optimized_model_filepath``).
"""

from __future__ import annotations

import time
from pathlib import Path

from benchmarks.measure import precisions
from benchmarks.runtimes.base import (
    ONNX_INPUT,
    Calibration,
    Prepared,
    RuntimeConfig,
    export_onnx,
)
from benchmarks.runtimes.census import onnx_census, ran_in
from optimizers.errors import described


def reader(calibration: Calibration, input_name: str = ONNX_INPUT):
    """ONNX Runtime's CalibrationDataReader over the engine's calibration batches."""
    from onnxruntime.quantization import CalibrationDataReader

    class EngineBatches(CalibrationDataReader):
        def __init__(self):
            self.batches = calibration.arrays()

        def get_next(self):
            batch = next(self.batches, None)
            return None if batch is None else {input_name: batch}

        def rewind(self):
            self.batches = calibration.arrays()
    return EngineBatches()


def quantize(source: Path, out: Path, calibration: Calibration, activations: str = "uint8"
             ) -> Path:
    """``source``'s static INT8 graph at ``out`` (QDQ, per-channel, U8S8 by default)."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process
    pre = out.with_name(out.stem + ".pre.onnx")
    try:
        quant_pre_process(str(source), str(pre))
    except Exception:  # pre-processing is advised, not required: quantize the graph as it is
        pre = source
    quantize_static(str(pre), str(out), reader(calibration), quant_format=QuantFormat.QDQ,
                    per_channel=True,
                    activation_type=QuantType.QUInt8 if activations == "uint8"
                    else QuantType.QInt8,
                    weight_type=QuantType.QInt8)
    if pre != source:
        pre.unlink(missing_ok=True)
    return out


def session(path: Path, threads: int, device: str, optimized: Path):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.optimized_model_filepath = str(optimized)
    # Errors only: it warns that an ENABLE_ALL graph it serialises is hardware-specific,
    # which is why the census reads it.
    options.log_severity_level = 3
    providers = ["CPUExecutionProvider"]
    if device == "cuda":
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise RuntimeError("this onnxruntime build has no CUDAExecutionProvider "
                               "(onnxruntime-gpu has it)")
        providers = ["CUDAExecutionProvider"]
    return ort.InferenceSession(str(path), options, providers=providers)


def _cpu_call(sess):
    import numpy as np
    import torch
    output = sess.get_outputs()[0].name

    def call(x):
        return torch.from_numpy(np.asarray(sess.run([output], {ONNX_INPUT: x.numpy()})[0]))
    return call


def _cuda_call(sess):
    """IO binding on the variant's CUDA tensors: no host copy of the input per call."""
    import numpy as np
    import torch
    output = sess.get_outputs()[0].name

    def call(x):
        x = x.contiguous()
        binding = sess.io_binding()
        binding.bind_input(ONNX_INPUT, "cuda", x.device.index or 0, np.float32,
                           list(x.shape), x.data_ptr())
        binding.bind_output(output, "cuda")
        sess.run_with_iobinding(binding)
        return torch.from_numpy(binding.copy_outputs_to_cpu()[0]).to(x.device)
    return call


def prepare(config: RuntimeConfig, model, example, *, calibration=None, workdir=None,
            onnx_path=None, **_) -> Prepared:
    import onnxruntime as ort
    t0 = time.perf_counter()
    workdir = Path(workdir)
    onnx_path = onnx_path or export_onnx(model, example, workdir / "model.onnx")
    path = onnx_path
    asked = precisions.get(config.precision)
    if asked.integer:
        path = workdir / f"model.ort-int8-{config.activations}.onnx"
        if not path.exists():
            try:
                quantize(onnx_path, path, calibration, config.activations)
            except Exception as exc:
                path.unlink(missing_ok=True)
                raise RuntimeError(f"ONNX Runtime's quantize_static failed: "
                                   f"{described(exc)}") from None
    elif asked.name != precisions.DEFAULT:
        raise RuntimeError(f"ONNX Runtime runs this variant's {config.precision} as fp32 "
                           f"only (no {config.precision} conversion here): no cell")
    optimized = workdir / f"{path.stem}.optimized-t{config.threads}-{config.device}.onnx"
    sess = session(path, config.threads, config.device, optimized)
    call = _cuda_call(sess) if config.device == "cuda" else _cpu_call(sess)
    ops = onnx_census(optimized, "ONNX Runtime's optimized graph").to_dict()
    precision = ran_in(ops, precisions.DEFAULT)
    return Prepared(fn=call, precision=precision, version=ort.__version__,
                    prepare_s=time.perf_counter() - t0, ops=ops, artefacts=[path],
                    details={"provider": sess.get_providers()[0],
                             "graph_optimization_level": "ORT_ENABLE_ALL",
                             **({"quantization": {"format": "QDQ", "per_channel": True,
                                                  "activations": config.activations,
                                                  "weights": "int8",
                                                  "calibration_samples": calibration.samples}}
                                if asked.integer else {})})
